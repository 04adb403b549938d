/*
 * Canned replies from the reply box, by keyboard: typing "/" at the start of a word opens
 * the list, the letters after it filter it (by shortcut, then by title), the arrow keys move,
 * Enter or Tab puts the reply in the box in place of "/…", Esc closes the list. The replies
 * come from the server with their placeholders already filled for this conversation (the
 * User's name, the order), so what is inserted is what will be sent; it can still be edited.
 */
(function () {
  "use strict";

  var root = document.getElementById("poppy-desk");
  var reply = root && root.querySelector("[data-reply]");
  var list = root && root.querySelector("[data-canned]");
  if (!reply || !list) {
    return;
  }
  var url = root.getAttribute("data-canned-url");
  var replies = null; // loaded on the first "/"
  var loading = null;
  var shown = [];
  var chosen = 0;

  // The "/word" the caret is at the end of, if any.
  function token() {
    var before = reply.value.slice(0, reply.selectionStart);
    var found = /(^|\s)\/([\w-]*)$/.exec(before);
    return found ? { query: found[2].toLowerCase(), start: before.length - found[2].length - 1 } : null;
  }

  function load() {
    if (!loading) {
      loading = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) {
            throw new Error(String(response.status));
          }
          return response.json();
        })
        .then(function (answer) {
          replies = answer.replies || [];
        })
        .catch(function () {
          loading = null; // try again on the next "/"
          replies = null;
        });
    }
    return loading;
  }

  function close() {
    list.hidden = true;
    list.textContent = "";
    shown = [];
    reply.removeAttribute("aria-activedescendant");
  }

  function render(query) {
    var byShortcut = replies.filter(function (item) {
      return item.shortcut.toLowerCase().indexOf(query) === 0;
    });
    var byTitle = replies.filter(function (item) {
      return byShortcut.indexOf(item) === -1 && item.title.toLowerCase().indexOf(query) !== -1;
    });
    shown = byShortcut.concat(byTitle);
    chosen = Math.min(chosen, Math.max(shown.length - 1, 0));
    list.textContent = "";
    if (!shown.length) {
      var none = document.createElement("li");
      none.className = "poppy-muted";
      none.textContent = replies.length
        ? "No canned reply matches /" + query
        : "No canned replies yet: your admin adds them under Canned replies";
      list.appendChild(none);
    }
    shown.forEach(function (item, index) {
      var option = document.createElement("li");
      option.id = "poppy-canned-" + index;
      option.setAttribute("role", "option");
      option.setAttribute("data-shortcut", item.shortcut);
      option.setAttribute("aria-selected", index === chosen ? "true" : "false");
      var name = document.createElement("strong");
      name.textContent = "/" + item.shortcut;
      var title = document.createElement("span");
      title.textContent = " " + item.title;
      var preview = document.createElement("div");
      preview.className = "poppy-muted";
      preview.textContent = item.text;
      option.appendChild(name);
      option.appendChild(title);
      option.appendChild(preview);
      option.addEventListener("mousedown", function (event) {
        event.preventDefault(); // keep the focus in the reply box
        chosen = index;
        insert();
      });
      list.appendChild(option);
    });
    if (shown.length) {
      reply.setAttribute("aria-activedescendant", "poppy-canned-" + chosen);
    }
    list.hidden = false;
  }

  function update() {
    var at = token();
    if (!at) {
      close();
      return;
    }
    if (replies === null) {
      load().then(function () {
        if (replies !== null && token()) {
          render(token().query);
        }
      });
      return;
    }
    render(at.query);
  }

  function insert() {
    var at = token();
    var item = shown[chosen];
    if (!at || !item) {
      return;
    }
    var end = reply.selectionStart;
    reply.value = reply.value.slice(0, at.start) + item.text + reply.value.slice(end);
    var caret = at.start + item.text.length;
    reply.setSelectionRange(caret, caret);
    reply.setAttribute("data-canned-inserted", item.shortcut);
    close();
  }

  reply.addEventListener("input", function () {
    chosen = 0;
    update();
  });
  reply.addEventListener("blur", close);

  // Capture: the list's keys come before the page's shortcuts (Esc would leave the box).
  document.addEventListener(
    "keydown",
    function (event) {
      if (event.target !== reply || list.hidden) {
        return;
      }
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        if (shown.length) {
          chosen = (chosen + (event.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length;
          render(token() ? token().query : "");
        }
      } else if ((event.key === "Enter" || event.key === "Tab") && !event.ctrlKey && !event.metaKey) {
        if (!shown.length) {
          return;
        }
        insert();
      } else if (event.key === "Escape") {
        close();
      } else {
        return;
      }
      event.preventDefault();
    },
    true
  );
})();
