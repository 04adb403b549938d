/*
 * The desk's keyboard shortcuts (listed in the help that "?" opens, on every desk page):
 * n next waiting, q the queue, / search (on the queue), r reply, Ctrl/Cmd+Enter send,
 * Esc leaves the reply box or closes the help.
 *
 * A single key is a shortcut only when it cannot be typing: not in a text box, a select or
 * anything editable, not while an input method composes, not before the page is ready
 * (desk.js marks it) and not once it is leaving (a link followed, a shortcut that navigates,
 * the next page still loading). Keys typed while the next page loads fall on this one: taken
 * for shortcuts they would open another page or put the reply's first words nowhere.
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
  var leaving = false;

  // Leaving: a link or a shortcut started the next page. Back from the browser's cache: here.
  window.addEventListener("beforeunload", function () {
    leaving = true;
  });
  window.addEventListener("pageshow", function () {
    leaving = false;
  });

  function typing(target) {
    if (!target || !target.tagName) {
      return false;
    }
    var tag = target.tagName.toLowerCase();
    return tag === "textarea" || tag === "select" || target.isContentEditable ||
      (tag === "input" && ["checkbox", "radio", "button", "submit"].indexOf(target.type) === -1);
  }

  function ready() {
    return !leaving && root.getAttribute("data-ready") === "1";
  }

  function go(url) {
    leaving = true;
    window.location.href = url;
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
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing) {
      return;
    }
    var target = event.composedPath ? event.composedPath()[0] : event.target;
    if (typing(target) || typing(document.activeElement) || help.open || !ready()) {
      return; // the dialog closes itself on Esc
    }
    var search = root.querySelector("[data-search]");
    switch (event.key) {
      case "?":
        openHelp();
        break;
      case "n":
        // desk-alerts.js opens the next one (its navigation marks this page leaving), or
        // says that no one else waits.
        document.dispatchEvent(new CustomEvent("poppy:next-waiting"));
        break;
      case "q":
        go(bar.getAttribute("data-queue-url"));
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
