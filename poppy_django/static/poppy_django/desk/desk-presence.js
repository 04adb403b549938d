/*
 * Presence in the bar of every desk page: available (new handoffs may be given to you) or
 * away (none are), set by a click. The server keeps it: an open desk page renews it (the
 * alerts' re-reads), and the bar follows what the server says ("poppy:me").
 */
(function () {
  "use strict";

  var box = document.querySelector("[data-presence]");
  if (!box) {
    return;
  }
  var text = box.querySelector("[data-presence-text]");
  var toggle = box.querySelector("[data-presence-toggle]");
  var csrf = document.querySelector("[data-alerts] input[name=csrfmiddlewaretoken]").value;

  function show(away) {
    box.setAttribute("data-away", away ? "true" : "false");
    text.textContent = away ? "Away: no new handoffs for you" : "Available";
    toggle.textContent = away ? "I'm back" : "Go away";
  }

  toggle.addEventListener("click", function () {
    var away = box.getAttribute("data-away") !== "true";
    toggle.disabled = true;
    fetch(box.getAttribute("data-url"), {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify({ away: away }),
    })
      .then(function (response) {
        if (!response.ok) {
          throw new Error(String(response.status));
        }
        return response.json();
      })
      .then(function (answer) {
        show(answer.away);
      })
      .catch(function () {
        text.textContent = "Could not change your presence; try again";
      })
      .then(function () {
        toggle.disabled = false;
      });
  });

  document.addEventListener("poppy:me", function (event) {
    if (event.detail) {
      show(event.detail.away);
    }
  });
})();
