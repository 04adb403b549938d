/*
 * The Poppy support desk in the browser.
 *
 * Live: an EventSource on django-eventstream's stream (channel poppy-desk, plus the
 * conversation's own channel on a conversation page). A nudge only says "something changed";
 * the page then re-fetches from the server what it has not seen (the queue's rows, or the
 * transcript after its last sequence number), so a lost nudge or a reconnection loses nothing.
 *
 * Correlation (request ids): every action gets an id made here (crypto.randomUUID) before it
 * is sent, and a pending row. The server echoes the id on the events the action causes; a
 * pending row is settled only by its own id. An event carrying an id that no pending row of
 * this page made goes to the diagnostics panel (superusers only) and settles nothing.
 *
 * Every nudge and every (re)connection is also told to the rest of the page as a DOM event
 * on the document ("poppy:nudge", "poppy:live"): the alerts (desk-alerts.js) follow the
 * same live feed without a connection of their own.
 */
(function () {
  "use strict";

  // The scripts loaded: base.html's notice that they did not is not for this page.
  Array.prototype.forEach.call(document.querySelectorAll("[data-desk-unloaded]"), function (n) {
    n.parentNode.removeChild(n);
  });

  var root = document.getElementById("poppy-desk");
  if (!root) {
    return;
  }
  var live = root.querySelector("[data-live]");
  var developer = root.hasAttribute("data-developer");

  function tell(name, detail) {
    document.dispatchEvent(new CustomEvent(name, { detail: detail }));
  }

  function setLive(text, state) {
    if (live) {
      live.textContent = text;
      live.setAttribute("data-state", state);
    }
  }

  function newRequestId() {
    if (window.crypto && typeof window.crypto.randomUUID === "function") {
      return window.crypto.randomUUID();
    }
    // Not a secure context (plain http on a non-local host): the same shape, from getRandomValues.
    var bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    var hex = Array.prototype.map.call(bytes, function (b) {
      return (b + 0x100).toString(16).slice(1);
    }).join("");
    return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join("-");
  }

  function parse(data) {
    try {
      return JSON.parse(data);
    } catch (e) {
      return null;
    }
  }

  /* One EventSource, reopened with backoff if the browser gives up on it (an HTTP error). */
  function connect(url, handlers) {
    var source = null;
    var everOpened = false;
    var delay = 1000;

    function open() {
      source = new EventSource(url);
      source.onopen = function () {
        delay = 1000;
        setLive("Live", "live");
        // First open: catch up with what happened since the page was rendered.
        // Reopen: fill the gap the disconnection left.
        handlers.opened(everOpened);
        tell("poppy:live", { reopened: everOpened });
        everOpened = true;
      };
      source.onerror = function () {
        if (source.readyState === EventSource.CLOSED) {
          setLive("Disconnected; retrying…", "down");
          window.setTimeout(open, delay);
          delay = Math.min(delay * 2, 30000);
        } else {
          setLive("Reconnecting…", "down");
        }
      };
      source.addEventListener("poppy.nudge", function (event) {
        var data = parse(event.data);
        if (data) {
          handlers.nudge(data);
          tell("poppy:nudge", data);
        }
      });
      // A change only staff see (a note, a take-over, an assignment): on the desk channel.
      source.addEventListener("poppy.desk", function (event) {
        var data = parse(event.data);
        if (data) {
          if (handlers.desk) {
            handlers.desk(data);
          }
          tell("poppy:desk", data);
        }
      });
      // What a colleague does on this conversation's page (desk-colleagues.js shows it).
      source.addEventListener("poppy.activity", function (event) {
        var data = parse(event.data);
        if (data) {
          tell("poppy:activity", data);
        }
      });
      source.addEventListener("poppy.delta", function (event) {
        var data = parse(event.data);
        if (data && handlers.delta) {
          handlers.delta(data);
        }
      });
      // django-eventstream refuses a channel with a stream-error event: stop, say why.
      source.addEventListener("stream-error", function (event) {
        var data = parse(event.data) || {};
        source.close();
        setLive("Live updates refused: " + (data.text || "error"), "refused");
      });
    }

    open();
    return function () {
      return source;
    };
  }

  function debounce(fn, ms) {
    var timer = null;
    return function () {
      if (timer) {
        window.clearTimeout(timer);
      }
      timer = window.setTimeout(function () {
        timer = null;
        fn();
      }, ms);
    };
  }

  /* The queue ---------------------------------------------------------------------------- */

  // How long someone has waited for a person: "45 s", "3 min", "1 h 05 min".
  function waited(since) {
    var seconds = Math.max(0, Math.floor((Date.now() - since) / 1000));
    if (seconds < 60) {
      return seconds + " s";
    }
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) {
      return minutes + " min";
    }
    var rest = minutes % 60;
    return Math.floor(minutes / 60) + " h " + (rest < 10 ? "0" : "") + rest + " min";
  }

  function tickWaits() {
    root.querySelectorAll("[data-since]").forEach(function (element) {
      var since = Date.parse(element.getAttribute("data-since"));
      if (!isNaN(since)) {
        element.textContent = waited(since);
      }
    });
  }

  function queuePage() {
    var tbody = root.querySelector("[data-rows]");
    var rowsUrl = root.getAttribute("data-rows-url");
    var stream = null; // the live stream's current EventSource, once connected
    var retry = null; // the next try after a failed refresh
    var refresh = debounce(function () {
      if (retry) {
        window.clearTimeout(retry);
        retry = null;
      }
      fetch(rowsUrl, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (!response.ok) {
            throw new Error(String(response.status));
          }
          return response.text();
        })
        .then(function (html) {
          // The page as the server renders it now (escaped by its templates): take its rows
          // and its tabs' counts.
          var fresh = new DOMParser().parseFromString(html, "text/html");
          var rows = fresh.querySelector("[data-rows]");
          var tabs = fresh.querySelector("[data-tabs]");
          if (rows) {
            tbody.innerHTML = rows.innerHTML;
            tickWaits();
          }
          var health = fresh.querySelector("[data-health]");
          if (health && root.querySelector("[data-health]")) {
            root.querySelector("[data-health]").innerHTML = health.innerHTML;
          }
          if (tabs && root.querySelector("[data-tabs]")) {
            root.querySelector("[data-tabs]").innerHTML = tabs.innerHTML;
          }
          if (stream && stream() && stream().readyState === EventSource.OPEN) {
            setLive("Live", "live"); // read again after a failed refresh: say so
          }
        })
        .catch(function () {
          // A server answering 503 (its database away) or no answer: try again shortly.
          setLive("Could not refresh the queue; retrying…", "down");
          retry = window.setTimeout(refresh, 5000);
        });
    }, 250);
    stream = connect(root.getAttribute("data-stream-url"), {
      opened: function () {
        refresh();
      },
      nudge: function () {
        refresh();
      },
      desk: function () {
        refresh(); // assigned, transferred, taken over: the With column and the tabs
      },
    });
    window.setInterval(refresh, 30000); // belt and braces: a quiet desk is still current
    tickWaits();
    window.setInterval(tickWaits, 5000);
    root.setAttribute("data-ready", "1"); // the shortcuts act from now on (desk-keys.js)
  }

  /* A conversation ------------------------------------------------------------------------ */

  function conversationPage() {
    var conversationId = root.getAttribute("data-conversation-id");
    var pageUrl = root.getAttribute("data-page-url");
    var eventsUrl = root.getAttribute("data-events-url");
    var transcript = root.querySelector("[data-transcript]");
    var writing = root.querySelector("[data-writing]");
    var pendingList = root.querySelector("[data-pending]");
    var diagnostics = root.querySelector("[data-diagnostics]");
    var diagnosticsCount = root.querySelector("[data-diagnostics-count]");
    var approvalsList = root.querySelector("[data-approvals]");
    var actionLog = root.querySelector("[data-action-log]");
    var health = root.querySelector("[data-health]");
    var csrf = root.querySelector("input[name=csrfmiddlewaretoken]").value;
    var lastSeq = parseInt(root.getAttribute("data-last-seq"), 10) || 0;
    // The newest private note, take-over or assignment shown (the desk's own log).
    var lastDesk = parseInt(root.getAttribute("data-last-desk-event"), 10) || 0;
    var changed = root.querySelector("[data-changed]");
    var arrivedIds = {}; // events a refused reply was written over: marked in the transcript
    // The newest event of an unbroken run this page's own actions wrote after lastSeq (a
    // join's state change): not news to this person, so a reply may be written over it.
    var ownThrough = 0;
    var stream = null; // the live stream's current EventSource, once connected
    var taken = root.querySelector("[data-taken]");
    var state = parse(document.getElementById("poppy-state").textContent) || {};
    var pending = {}; // request id -> {row, action, events, answered}
    var seenStray = {}; // "request id/seq" already listed in diagnostics
    var deltas = {}; // message id -> text written so far
    var fetching = null;
    var again = false;

    var me = root.getAttribute("data-user");

    /* "Waiting since": the date as the server formats it, then how long ago, ticking. */
    function showWaitingSince(cell, next) {
      cell.textContent = "";
      if (!next.handoff_requested_at) {
        cell.textContent = "—";
        return;
      }
      var since = document.createElement("time");
      since.setAttribute("data-since", next.handoff_requested_at);
      cell.appendChild(document.createTextNode(next.handoff_requested_display + " ("));
      cell.appendChild(since);
      cell.appendChild(document.createTextNode(" ago)"));
      tickWaits();
    }

    /* Who has it, as this person reads it: the state always comes from the server. */
    function ownerNotice(next) {
      var notice = root.querySelector("[data-owner]");
      var holder = next.assignee;
      notice.textContent = "";
      notice.hidden = true;
      if (next.closed || !holder || holder === me) {
        if (holder === me && next.status === "queued") {
          notice.textContent = "Assigned to you: join to answer.";
          notice.hidden = false;
          notice.setAttribute("data-kind", "mine");
        }
        return;
      }
      notice.textContent =
        holder + (next.responder === "human" ? " has this conversation." : " is assigned this conversation.") +
        " Take over to answer it yourself.";
      notice.setAttribute("data-kind", "other");
      notice.hidden = false;
    }

    function applyState(next) {
      var waitingChanged = next.handoff_requested_at !== state.handoff_requested_at;
      state = next;
      ["status_label", "assignee", "why", "team", "missed"].forEach(function (name) {
        var cell = root.querySelector('[data-field="' + name + '"]');
        if (cell) {
          cell.textContent = next[name] || "—";
        }
      });
      var waiting = root.querySelector('[data-field="handoff_requested_at"]');
      if (waiting && waitingChanged) {
        showWaitingSince(waiting, next);
      }
      root.querySelectorAll("[data-stalled]").forEach(function (element) {
        element.hidden = !next.stalled;
      });
      var holder = next.assignee;
      var other = !!holder && holder !== me;
      var holding = next.responder === "human" && holder === me;
      root.querySelectorAll("[data-needs]").forEach(function (control) {
        var ok = !next.closed;
        control.getAttribute("data-needs").split(" ").forEach(function (need) {
          if (need === "joinable") {
            ok = ok && !holding && !other; // held by someone else: Take over instead
          } else if (need === "other") {
            ok = ok && other;
          } else if (need === "holding") {
            ok = ok && holding;
          } else if (need === "free") {
            ok = ok && !other; // Send joins first when no one has it
          } else if (need === "queued") {
            ok = ok && next.status === "queued";
          } else if (need === "assigned") {
            ok = ok && !!holder;
          } else if (need === "undirected") {
            ok = ok && !next.direct;
          }
        });
        if (control.hasAttribute("data-hide-unless")) {
          control.hidden = !ok;
        }
        control.disabled = !ok;
      });
      ownerNotice(next);
      if (!other) {
        // It came back to this person (or to no one): the take-over notice no longer holds,
        // and the reply box (its draft kept) sends again.
        taken.hidden = true;
      }
      showTags(next.tags || []);
      root.setAttribute("data-holder", holder || "");
    }

    /* The conversation's tags, as the server has them, each with its remove button. */
    function showTags(names) {
      var box = root.querySelector("[data-tags]");
      if (!box) {
        return;
      }
      box.textContent = "";
      if (!names.length) {
        var none = document.createElement("span");
        none.className = "poppy-muted";
        none.textContent = "No tags.";
        box.appendChild(none);
      }
      names.forEach(function (name) {
        var chip = document.createElement("span");
        chip.className = "poppy-tag poppy-tag-label";
        chip.setAttribute("data-tag", name);
        chip.appendChild(document.createTextNode(name + " "));
        var remove = document.createElement("button");
        remove.type = "button";
        remove.className = "poppy-untag";
        remove.setAttribute("data-untag", name);
        remove.setAttribute("aria-label", "Remove the tag " + name);
        remove.textContent = "×";
        chip.appendChild(remove);
        box.appendChild(chip);
      });
    }

    /* Pending rows: one per request id, settled by that id only. */
    function addPending(requestId, label) {
      var none = pendingList.querySelector("[data-none]");
      if (none) {
        none.remove();
      }
      var row = document.createElement("li");
      row.className = "poppy-request";
      row.setAttribute("data-request-id", requestId);
      row.setAttribute("data-state", "pending");
      var title = document.createElement("strong");
      title.textContent = label;
      var status = document.createElement("span");
      status.className = "poppy-request-status";
      status.textContent = " — sending…";
      row.appendChild(title);
      row.appendChild(status);
      if (developer) {
        var rid = document.createElement("code");
        rid.className = "poppy-rid";
        rid.textContent = requestId.slice(0, 8);
        rid.title = requestId;
        row.appendChild(document.createTextNode(" "));
        row.appendChild(rid);
      }
      pendingList.insertBefore(row, pendingList.firstChild);
      pending[requestId] = { row: row, events: [], answered: false };
      return pending[requestId];
    }

    function markPending(entry, rowState, text) {
      entry.row.setAttribute("data-state", rowState);
      entry.row.querySelector(".poppy-request-status").textContent = " — " + text;
    }

    function settle(requestId, seq) {
      var entry = pending[requestId];
      if (entry.events.indexOf(seq) === -1) {
        entry.events.push(seq);
      }
      var n = entry.events.length;
      markPending(entry, "settled", developer ? "done (" + n + (n === 1 ? " event" : " events") + ")" : "done");
    }

    function stray(requestId, seq, type, via) {
      var key = requestId + "/" + seq;
      if (!diagnostics || seenStray[key]) {
        return;
      }
      seenStray[key] = true;
      var item = document.createElement("li");
      item.setAttribute("data-request-id", requestId);
      item.textContent = "#" + seq + " " + type + " — request " + requestId + " (" + via + ")";
      diagnostics.insertBefore(item, diagnostics.firstChild);
      diagnosticsCount.textContent = String(diagnostics.children.length);
    }

    /* One event seen (from the stream or a fetch) that carries a request id. */
    function correlate(requestId, seq, type, via) {
      if (!requestId) {
        return;
      }
      if (Object.prototype.hasOwnProperty.call(pending, requestId)) {
        settle(requestId, seq);
      } else {
        stray(requestId, seq, type, via);
      }
    }

    function highlight() {
      var id = root.getAttribute("data-highlight");
      var row = id ? document.getElementById(id) : null;
      if (row) {
        row.classList.add("poppy-highlight");
        row.scrollIntoView({ block: "center" });
      } else {
        transcript.lastElementChild && transcript.lastElementChild.scrollIntoView({ block: "end" });
      }
    }

    function showDelta(data) {
      deltas[data.message_id] = (deltas[data.message_id] || "") + data.text;
      writing.textContent = "Company Agent is writing: " + deltas[data.message_id];
      writing.hidden = false;
    }

    /* A note, a take-over or an assignment sits after the event it was written after. */
    function placeDeskEvent(item) {
      var anchor = transcript.querySelector('[data-seq="' + item.after_seq + '"]');
      if (!anchor) {
        transcript.insertAdjacentHTML("beforeend", item.html); // escaped by the server
        return;
      }
      while (anchor.nextElementSibling && anchor.nextElementSibling.hasAttribute("data-desk-event")) {
        anchor = anchor.nextElementSibling;
      }
      anchor.insertAdjacentHTML("afterend", item.html); // escaped by the server
    }

    /* A reply refused because the conversation moved on: say what arrived, keep the text. */
    function showChanged(refusal) {
      var arrived = refusal.arrived || [];
      changed.textContent = "";
      var title = document.createElement("strong");
      title.textContent = "Not sent: " + (refusal.error_description || "the conversation changed.");
      changed.appendChild(title);
      var list = document.createElement("ul");
      arrived.forEach(function (event) {
        var item = document.createElement("li");
        item.setAttribute("data-arrived", event.id || "");
        if (event.type === "message" && event.message) {
          var message = event.message;
          // The transcript's words for who wrote it (desk/transcript.py).
          var who = message.role === "company"
            ? (message.sender === "human" ? "A person" : "Company Agent")
            : (message.sender === "human" ? "Customer (in person)"
              : (message.text ? "Customer" : "Customer's agent"));
          item.textContent = who + ": " + (message.text || "(no text)");
        } else if (event.type === "state") {
          item.textContent = "The conversation's state changed";
        } else {
          item.textContent = event.type || "event";
        }
        list.appendChild(item);
      });
      changed.appendChild(list);
      var hint = document.createElement("p");
      hint.textContent = "Your reply is still in the box: read what arrived, then send again.";
      changed.appendChild(hint);
      changed.hidden = false;
      arrived.forEach(function (event) {
        arrivedIds[event.id] = true;
        var row = event.id ? document.getElementById(event.id) : null;
        if (row) {
          row.classList.add("poppy-arrived");
        }
      });
      refill(); // the rows not shown yet are marked as they come in
    }

    /* Fetch every event after lastSeq (page by page) and append it. */
    function refill() {
      if (fetching) {
        again = true;
        return fetching;
      }
      fetching = fetch(eventsUrl + "?after=" + lastSeq + "&desk_after=" + lastDesk, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      })
        .then(function (response) {
          if (!response.ok) {
            throw new Error(String(response.status));
          }
          return response.json();
        })
        .then(function (page) {
          var nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
          page.events.forEach(function (event) {
            if (event.seq <= lastSeq) {
              return;
            }
            transcript.insertAdjacentHTML("beforeend", event.html); // escaped by the server
            if (arrivedIds[event.id]) {
              transcript.lastElementChild.classList.add("poppy-arrived");
            }
            lastSeq = event.seq;
            correlate(event.request_id, event.seq, event.type, "transcript");
            if (event.type === "message") {
              writing.hidden = true;
              deltas = {};
            }
          });
          (page.desk_events || []).forEach(function (item) {
            if (item.id <= lastDesk) {
              return;
            }
            placeDeskEvent(item);
            lastDesk = item.id;
            correlate(item.request_id, "d" + item.id, item.kind, "transcript");
          });
          if (stream && stream() && stream().readyState === EventSource.OPEN) {
            setLive("Live", "live"); // read again after a failed re-read: say so
          }
          approvalsList.innerHTML = page.approvals_html; // escaped by the server
          actionLog.innerHTML = page.actions_html; // escaped by the server
          health.innerHTML = page.health_html; // escaped by the server
          applyState(page.conversation);
          if (page.events.length && nearBottom) {
            transcript.lastElementChild.scrollIntoView({ block: "end" });
          }
          if (page.has_more) {
            again = true;
          }
        })
        .catch(function () {
          setLive("Could not load new events; retrying…", "down");
          window.setTimeout(refill, 2000);
        })
        .then(function () {
          fetching = null;
          if (again) {
            again = false;
            refill();
          }
        });
      return fetching;
    }

    function post(url, body, label) {
      var requestId = newRequestId();
      var entry = addPending(requestId, label);
      body.request_id = requestId;
      return fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json",
          "X-CSRFToken": csrf,
        },
        body: JSON.stringify(body),
      })
        .then(function (response) {
          return response.json().then(
            function (json) {
              return { ok: response.ok, status: response.status, json: json };
            },
            function () {
              return { ok: false, status: response.status, json: {} };
            }
          );
        })
        .then(function (answer) {
          entry.answered = true;
          if (!answer.ok) {
            markPending(entry, "failed", "refused: " + (answer.json.error_description || answer.json.error || answer.status));
            if (answer.json.conversation) {
              applyState(answer.json.conversation); // who has it now, what can be done
            }
            if (answer.json.error === "conversation_changed") {
              showChanged(answer.json);
            }
            return false;
          }
          if (body.seen !== undefined) {
            changed.hidden = true;
          }
          (answer.json.events || []).slice().sort(function (a, b) {
            return a - b;
          }).forEach(function (seq) {
            if (seq === Math.max(lastSeq, ownThrough) + 1) {
              ownThrough = seq;
            }
          });
          if (answer.json.running && entry.row.getAttribute("data-state") === "pending") {
            // An approval: recorded; a worker runs it and its outcome (carrying this
            // request id) settles the row when it arrives on the live stream.
            markPending(entry, "pending", "approved; running…");
            refill();
          } else if (!answer.json.events.length && !(answer.json.desk_events || []).length) {
            markPending(entry, "settled", "no change");
          } else if (entry.row.getAttribute("data-state") === "pending") {
            markPending(entry, "pending", "accepted; waiting for its events…");
            refill(); // the stream normally delivers first; this covers a lost nudge
          }
          applyState(answer.json.conversation);
          return true;
        })
        .catch(function () {
          markPending(entry, "failed", "not sent (network)");
          return false;
        });
    }

    function actionUrl(name) {
      return pageUrl + "action/" + name + "/";
    }

    root.querySelectorAll("[data-action]").forEach(function (button) {
      button.addEventListener("click", function () {
        var question = button.getAttribute("data-confirm");
        if (question && !window.confirm(question.replace("{holder}", state.assignee || "them"))) {
          return;
        }
        post(actionUrl(button.getAttribute("data-action")), {}, button.textContent.trim());
      });
    });

    root.querySelectorAll("form[data-form]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var submitter = event.submitter && event.submitter.name === "action" ? event.submitter : null;
        var name = submitter ? submitter.value : form.getAttribute("data-form");
        var fields = form.querySelectorAll("textarea[name], input[name], select[name]");
        var body = {};
        fields.forEach(function (field) {
          body[field.name] = field.value;
        });
        if (name === "reply" || name === "macro") {
          // Refused if anything arrived after what this page shows (or wrote itself).
          body.seen = Math.max(lastSeq, ownThrough);
        }
        var question = submitter && submitter.getAttribute("data-confirm");
        if (question && !window.confirm(question)) {
          return;
        }
        var label = (submitter || form.querySelector("button[type=submit]")).textContent.trim();
        post(actionUrl(name), body, label).then(function (ok) {
          if (ok) {
            fields.forEach(function (field) {
              if (field.tagName.toLowerCase() !== "select") {
                field.value = "";
              }
            });
          }
        });
      });
    });

    root.querySelector("[data-tags]").addEventListener("click", function (event) {
      var button = event.target.closest("button[data-untag]");
      if (button) {
        button.disabled = true;
        post(actionUrl("untag"), { tag: button.getAttribute("data-untag") }, "Remove tag");
      }
    });

    approvalsList.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-decision]");
      if (!button) {
        return;
      }
      var decision = button.getAttribute("data-decision");
      var record = button.getAttribute("data-record");
      button.disabled = true;
      post(pageUrl + "approvals/" + record + "/" + decision + "/", {}, decision === "approve" ? "Approve" : "Reject");
    });

    stream = connect(root.getAttribute("data-stream-url"), {
      opened: function () {
        refill();
      },
      nudge: function (data) {
        if (data.conversation_id !== conversationId) {
          return;
        }
        correlate(data.request_id, data.seq, data.type, "stream");
        if (typeof data.seq !== "number" || data.seq > lastSeq) {
          refill();
        }
      },
      desk: function (data) {
        if (data.conversation_id !== conversationId) {
          return;
        }
        if (data.kind === "took_over" && data.other === me && data.by !== me) {
          // Taken from this person: say so until they have read it.
          taken.querySelector("[data-taken-text]").textContent =
            data.by + " took over this conversation from you: your replies are no longer sent.";
          taken.hidden = false;
        }
        refill();
      },
      delta: showDelta,
    });
    taken.querySelector("button").addEventListener("click", function () {
      taken.hidden = true;
    });
    window.setInterval(refill, 20000); // belt and braces under a silent stream

    applyState(state);
    tickWaits();
    window.setInterval(tickWaits, 5000);
    highlight();
    root.setAttribute("data-ready", "1");
  }

  if (root.getAttribute("data-page") === "queue") {
    queuePage();
  } else {
    conversationPage();
  }
})();
