/*
 * Alerts on every desk page: how many conversations wait for a person (in the bar and in
 * the tab's title, for everyone), a desktop notification and an optional sound when one
 * starts waiting (for the one it waits for only; for one that waits for no one in
 * particular, for those available to take it and in the rotation, as the server says), a warning to the one it waits for before it
 * goes back to the Company Agent, and "next waiting".
 *
 * It follows desk.js's live feed (the "poppy:live" and "poppy:nudge" DOM events) and re-reads
 * the desk's alerts.json: the server says what waits; the page only compares it with what
 * this tab has already been told (sessionStorage), so moving from page to page alerts on
 * what arrived meanwhile and never twice on the same conversation. The first read of a new
 * tab alerts on nothing: what already waits is in the count.
 *
 * The Notification API is asked only from a click ("Turn on desktop alerts"), as browsers
 * require; the sound is made with WebAudio once the staffer has touched the page.
 */
(function () {
  "use strict";

  var bar = document.querySelector("[data-alerts]");
  if (!bar) {
    return;
  }
  var root = document.getElementById("poppy-desk");
  var url = bar.getAttribute("data-alerts-url");
  var here = root ? root.getAttribute("data-conversation-id") : null;
  var me = root ? root.getAttribute("data-user") : null;
  var hours = bar.querySelector("[data-office-closed]");
  var count = bar.querySelector("[data-waiting-count]");
  var enable = bar.querySelector("[data-alerts-enable]");
  var stateText = bar.querySelector("[data-alerts-state]");
  var sound = bar.querySelector("[data-alerts-sound]");
  var notice = bar.querySelector("[data-notice]");
  var baseTitle = document.title;
  var SEEN = "poppy-desk.waiting-seen";
  var SOUND = "poppy-desk.sound";
  var WARNED = "poppy-desk.warned";
  var warnTimers = {};
  var waiting = []; // the server's list: the longest waiting first
  var audio = null;
  var noticeTimer = null;

  function storage(kind) {
    try {
      return window[kind];
    } catch (e) {
      return null; // storage disabled: alerts still work within the page
    }
  }

  function loadSeen() {
    var store = storage("sessionStorage");
    var raw = store && store.getItem(SEEN);
    if (raw === null || raw === undefined) {
      return null;
    }
    try {
      return JSON.parse(raw);
    } catch (e) {
      return null;
    }
  }

  var seen = loadSeen(); // null: this tab has read nothing yet

  function saveSeen() {
    var store = storage("sessionStorage");
    if (store) {
      store.setItem(SEEN, JSON.stringify(seen));
    }
  }

  function say(text) {
    notice.textContent = text;
    notice.hidden = false;
    if (noticeTimer) {
      window.clearTimeout(noticeTimer);
    }
    noticeTimer = window.setTimeout(function () {
      notice.hidden = true;
    }, 15000);
  }

  /* Desktop notifications ------------------------------------------------------------------ */

  function showPermission() {
    if (!("Notification" in window)) {
      enable.hidden = true;
      stateText.textContent = "";
      return;
    }
    var permission = window.Notification.permission;
    enable.hidden = permission !== "default";
    if (permission === "granted") {
      stateText.textContent = "Desktop alerts on";
    } else if (permission === "denied") {
      stateText.textContent = "Desktop alerts are blocked in this browser's site settings";
    } else {
      stateText.textContent = "";
    }
    bar.setAttribute("data-permission", permission);
  }

  enable.addEventListener("click", function () {
    var asked = window.Notification.requestPermission(showPermission);
    if (asked && typeof asked.then === "function") {
      asked.then(showPermission);
    }
  });

  function notify(item) {
    if (!("Notification" in window) || window.Notification.permission !== "granted") {
      return;
    }
    var title = item.assignee === me ? "Waiting for you: " : "Waiting for a person: ";
    var shown = new window.Notification(title + item.who, {
      body: item.said || "",
      tag: "poppy-waiting-" + item.id, // one per conversation, however many tabs are open
    });
    shown.onclick = function () {
      window.focus();
      window.location.href = item.url;
    };
  }

  /* Sound -------------------------------------------------------------------------------- */

  function soundOn() {
    var store = storage("localStorage");
    return !!(store && store.getItem(SOUND) === "on");
  }

  // Browsers start audio only after the person has clicked or typed on the page.
  function wakeAudio() {
    if (!soundOn() || !(window.AudioContext || window.webkitAudioContext)) {
      return;
    }
    if (!audio) {
      audio = new (window.AudioContext || window.webkitAudioContext)();
    }
    if (audio.state === "suspended") {
      audio.resume();
    }
  }

  function chime() {
    if (!soundOn() || !audio || audio.state !== "running") {
      return;
    }
    [880, 1320].forEach(function (frequency, i) {
      var start = audio.currentTime + i * 0.18;
      var tone = audio.createOscillator();
      var gain = audio.createGain();
      tone.frequency.value = frequency;
      gain.gain.setValueAtTime(0.0001, start);
      gain.gain.exponentialRampToValueAtTime(0.2, start + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, start + 0.16);
      tone.connect(gain).connect(audio.destination);
      tone.start(start);
      tone.stop(start + 0.17);
    });
  }

  sound.checked = soundOn();
  sound.addEventListener("change", function () {
    var store = storage("localStorage");
    if (store) {
      store.setItem(SOUND, sound.checked ? "on" : "off");
    }
    wakeAudio();
    chime(); // what it will sound like
  });
  ["pointerdown", "keydown"].forEach(function (name) {
    document.addEventListener(name, wakeAudio, { once: true, capture: true });
  });

  /* The count, the title, the new arrivals --------------------------------------------------- */

  /* Whether this staffer is alerted of a waiting conversation: the server says (it waits for
     them, or for no one in particular and they take such: available, in the rotation, in its
     team); supervisors out of the rotation see the count only. */
  function forMe(item) {
    return !!item.alert;
  }

  function warnedList() {
    var store = storage("sessionStorage");
    try {
      return JSON.parse((store && store.getItem(WARNED)) || "[]");
    } catch (e) {
      return [];
    }
  }

  /* The one a handoff waits for is warned before it goes back to the Company Agent. */
  function warn(id) {
    delete warnTimers[id];
    var item = waiting.filter(function (w) {
      return w.id === id;
    })[0];
    var warned = warnedList();
    if (!item || item.assignee !== me || warned.indexOf(id) !== -1) {
      return;
    }
    warned.push(id);
    var store = storage("sessionStorage");
    if (store) {
      store.setItem(WARNED, JSON.stringify(warned.slice(-50)));
    }
    var left = Math.max(0, Math.round((item.due_in - item.warn_in) / 60));
    var words = item.who + " goes back to the Company Agent " +
      (left < 1 ? "in under a minute" : "in " + left + " min") + " unless you join";
    say(words);
    chime();
    if ("Notification" in window && window.Notification.permission === "granted") {
      var shown = new window.Notification("Going back soon: " + item.who, {
        body: words,
        tag: "poppy-going-back-" + item.id,
      });
      shown.onclick = function () {
        window.focus();
        window.location.href = item.url;
      };
    }
  }

  function scheduleWarnings() {
    waiting.forEach(function (item) {
      if (item.warn_in === null || item.warn_in === undefined || item.assignee !== me || warnTimers[item.id]) {
        return;
      }
      warnTimers[item.id] = window.setTimeout(function () {
        warn(item.id);
      }, Math.max(0, item.warn_in * 1000));
    });
  }

  function apply(answer) {
    document.dispatchEvent(new CustomEvent("poppy:me", { detail: answer.me }));
    hours.hidden = answer.office_open !== false;
    waiting = answer.conversations || [];
    count.textContent = String(answer.waiting);
    bar.setAttribute("data-waiting", String(answer.waiting));
    document.title = answer.waiting > 0 ? "(" + answer.waiting + ") " + baseTitle : baseTitle;
    var ids = waiting.map(function (item) {
      return item.id;
    });
    if (seen === null) {
      seen = ids; // a new tab: what already waits is counted, not announced
    } else {
      var fresh = waiting.filter(function (item) {
        return seen.indexOf(item.id) === -1 && item.id !== here && forMe(item);
      });
      fresh.forEach(notify);
      if (fresh.length) {
        chime();
        say(
          fresh.length === 1
            ? fresh[0].who + " is waiting for a person"
            : fresh.length + " more conversations are waiting for a person"
        );
      }
      // Forget what no longer waits: if it waits again, that is news again.
      seen = ids;
    }
    saveSeen();
    scheduleWarnings();
  }

  var reading = null;
  var readAgain = false;

  function read() {
    if (reading) {
      readAgain = true;
      return;
    }
    reading = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error(String(response.status));
        }
        return response.json();
      })
      .then(apply)
      .catch(function () {
        /* the next nudge or the timer reads again */
      })
      .then(function () {
        reading = null;
        if (readAgain) {
          readAgain = false;
          read();
        }
      });
  }

  var timer = null;
  function soon() {
    if (timer) {
      window.clearTimeout(timer);
    }
    timer = window.setTimeout(function () {
      timer = null;
      read();
    }, 250);
  }

  /* Next waiting: the first other than this page's, in the queue's fair order. */
  function nextWaiting() {
    var next = waiting.filter(function (item) {
      return item.id !== here;
    })[0];
    if (next) {
      window.location.href = next.url;
    } else {
      say("No one else is waiting for a person");
    }
  }

  /* A teammate gave you a conversation (assigned or transferred), or took yours. */
  function given(event) {
    var news = event.detail || {};
    if (news.kind === "to_team" && news.assignee === me && news.by !== me) {
      news = { kind: "to_team", other: me, by: news.by, team: news.other,
               desk_event: news.desk_event, conversation_id: news.conversation_id };
    }
    if (news.other !== me || news.by === me) {
      return;
    }
    var words = {
      assigned: news.by + " assigned a conversation to you",
      transferred: news.by + " transferred a conversation to you",
      took_over: news.by + " took over a conversation from you",
      reassigned: news.by
        ? "A conversation waiting for " + news.by + " was given to you"
        : "A waiting conversation was given to you",
      to_team: news.by + " gave a conversation to " + news.team + ": it is yours",
    }[news.kind];
    if (!words) {
      return;
    }
    say(words);
    if (news.kind !== "took_over") {
      chime();
    }
    if ("Notification" in window && window.Notification.permission === "granted") {
      var shown = new window.Notification(words, { tag: "poppy-desk-" + news.desk_event });
      shown.onclick = function () {
        window.focus();
        window.location.href = bar.getAttribute("data-queue-url") + news.conversation_id + "/";
      };
    }
  }

  document.addEventListener("poppy:desk", given);
  bar.querySelector("[data-next-waiting]").addEventListener("click", nextWaiting);
  document.addEventListener("poppy:next-waiting", nextWaiting);
  document.addEventListener("poppy:live", soon);
  document.addEventListener("poppy:nudge", soon);
  window.setInterval(read, 30000); // a quiet or broken stream still counts right
  showPermission();
  read();
})();
