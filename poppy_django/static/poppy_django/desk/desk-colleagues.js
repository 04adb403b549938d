/*
 * Colleagues on this conversation's page: who else has it open, who is typing a reply.
 *
 * This page says what its staff member does (desk/colleagues.py passes it on, in their name,
 * to the conversation's other pages over the desk's live channel): "viewing" once its live
 * stream is open (with "hello", so the pages already open say again that they are there)
 * and every 20 s, "typing" while the reply box changes (at most every 3 s), "idle" 5 s after
 * the last key or once the reply is sent, "gone" as the page closes. It shows what the
 * others say (desk.js tells each as "poppy:activity"), forgetting a colleague not heard
 * from for 45 s (a page closed without a word) and their typing after 8 s. A courtesy, not
 * a lock: who may answer is the server's rule.
 */
(function () {
  "use strict";

  var root = document.getElementById("poppy-desk");
  var box = root && root.querySelector("[data-colleagues]");
  if (!box || root.getAttribute("data-page") !== "conversation") {
    return;
  }
  var VIEWING_EVERY = 20000;
  var FORGET_VIEWER = 45000;
  var FORGET_TYPING = 8000;
  var TYPING_EVERY = 3000;
  var IDLE_AFTER = 5000;

  var url = root.getAttribute("data-activity-url");
  var me = root.getAttribute("data-user");
  var reply = root.querySelector("[data-reply]");
  var csrf = root.querySelector("input[name=csrfmiddlewaretoken]").value;
  var others = {}; // username -> {seen: ms, typing: ms (0: not typing)}
  var typingSince = 0; // when this page last said "typing" (0: it is not typing)
  var idleTimer = null;

  function say(doing, options) {
    var extra = options || {};
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      keepalive: !!extra.leaving, // "gone" is sent as the page closes
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify({ doing: doing, hello: !!extra.hello }),
    }).catch(function () {
      // A courtesy: the next heartbeat says it again.
    });
  }

  function names(list) {
    if (list.length < 2) {
      return list.join("");
    }
    return list.slice(0, -1).join(", ") + " and " + list[list.length - 1];
  }

  function line(kind, text) {
    var item = document.createElement("span");
    item.className = "poppy-colleague";
    item.setAttribute("data-kind", kind);
    item.textContent = text;
    return item;
  }

  function render() {
    var now = Date.now();
    var viewing = [];
    var typing = [];
    Object.keys(others).sort().forEach(function (name) {
      var other = others[name];
      if (now - other.seen > FORGET_VIEWER) {
        delete others[name];
      } else if (other.typing && now - other.typing <= FORGET_TYPING) {
        typing.push(name);
      } else {
        viewing.push(name);
      }
    });
    box.textContent = "";
    if (typing.length) {
      box.appendChild(line("typing", names(typing) + (typing.length > 1 ? " are" : " is") + " typing a reply…"));
    }
    if (viewing.length) {
      box.appendChild(line("viewing", names(viewing) + (viewing.length > 1 ? " are" : " is") + " also viewing this conversation"));
    }
    box.setAttribute("data-typing", typing.join(" "));
    box.setAttribute("data-viewing", viewing.join(" "));
    box.hidden = !typing.length && !viewing.length;
  }

  function stopTyping() {
    if (idleTimer) {
      window.clearTimeout(idleTimer);
      idleTimer = null;
    }
    if (typingSince) {
      typingSince = 0;
      say("idle");
    }
  }

  document.addEventListener("poppy:activity", function (event) {
    var data = event.detail || {};
    if (!data.by || data.by === me) {
      return;
    }
    if (data.doing === "gone") {
      delete others[data.by];
    } else {
      others[data.by] = { seen: Date.now(), typing: data.doing === "typing" ? Date.now() : 0 };
    }
    if (data.hello) {
      say(typingSince ? "typing" : "viewing"); // a page just opened: say we are here
    }
    render();
  });

  // Once the live stream is open (and again after a reconnection): here, and who else is?
  document.addEventListener("poppy:live", function () {
    say(typingSince ? "typing" : "viewing", { hello: true });
  });

  if (reply) {
    reply.addEventListener("input", function () {
      if (!reply.value.trim()) {
        stopTyping();
        return;
      }
      var now = Date.now();
      if (!typingSince || now - typingSince >= TYPING_EVERY) {
        typingSince = now;
        say("typing");
      }
      if (idleTimer) {
        window.clearTimeout(idleTimer);
      }
      idleTimer = window.setTimeout(stopTyping, IDLE_AFTER);
    });
    reply.form.addEventListener("submit", function () {
      window.setTimeout(stopTyping, 0); // sent (or refused: the text stays, and says so)
    });
  }

  window.addEventListener("pagehide", function () {
    say("gone", { leaving: true });
  });
  window.setInterval(function () {
    say(typingSince ? "typing" : "viewing");
  }, VIEWING_EVERY);
  window.setInterval(render, 2000);
})();
