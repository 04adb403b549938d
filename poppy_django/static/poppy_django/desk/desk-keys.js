/*
 * The desk's keyboard shortcuts (listed in the help that "?" opens, on every desk page):
 * n next waiting, q the queue, / search (on the queue), r reply, Ctrl/Cmd+Enter send,
 * Esc leaves the reply box or closes the help. Letter keys act only when no text box has
 * the focus, so typing is never taken for a shortcut.
 */
(function () {
  "use strict";

  var root = document.getElementById("poppy-desk");
  var help = document.querySelector("[data-shortcuts]");
  var bar = document.querySelector("[data-alerts]");
  if (!root || !help || !bar) {
    return;
  }
  var reply = root.querySelector("[data-reply]");

  function typing(target) {
    if (!target || !target.tagName) {
      return false;
    }
    var tag = target.tagName.toLowerCase();
    return tag === "textarea" || tag === "select" || target.isContentEditable ||
      (tag === "input" && ["checkbox", "radio", "button", "submit"].indexOf(target.type) === -1);
  }

  function openHelp() {
    if (typeof help.showModal === "function") {
      if (!help.open) {
        help.showModal();
      }
    } else {
      help.setAttribute("open", "");
    }
  }

  bar.querySelector("[data-shortcuts-open]").addEventListener("click", openHelp);

  if (reply) {
    reply.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        var form = reply.form;
        if (form.requestSubmit) {
          form.requestSubmit();
        } else {
          form.querySelector("[type=submit]").click();
        }
      } else if (event.key === "Escape" && !event.defaultPrevented) {
        reply.blur();
      }
    });
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (typing(event.target) || help.open) {
      return; // the dialog closes itself on Esc
    }
    var search = root.querySelector("[data-search]");
    switch (event.key) {
      case "?":
        openHelp();
        break;
      case "n":
        document.dispatchEvent(new CustomEvent("poppy:next-waiting"));
        break;
      case "q":
        window.location.href = bar.getAttribute("data-queue-url");
        break;
      case "r":
        if (!reply) {
          return;
        }
        reply.focus();
        break;
      case "/":
        if (!search) {
          return;
        }
        search.focus();
        search.select();
        break;
      default:
        return;
    }
    event.preventDefault();
  });
})();
