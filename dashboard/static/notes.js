// The notes box of an experiment or trial page (_notes.html). The note is shown as light
// markdown built from text nodes and a few plain elements, never through innerHTML: whatever
// a note holds stays text. Saving sends the version the text was edited from, so a save made
// meanwhile elsewhere is reported (409) instead of overwritten, and the typed text is kept
// on every failure. Nothing else on the page writes into the box; a page that wants to
// reload asks DnnNotes.whenIdle first, so it never throws away a note being typed.
(function () {
  "use strict";
  const box = document.getElementById("notes");
  if (!box) return;
  const data = JSON.parse(document.getElementById("note-data").textContent);
  const $ = function (id) { return document.getElementById(id); };
  const view = $("note-view"), form = $("note-form"), area = $("note-text"), status = $("note-status");
  const edit = $("note-edit"), save = $("note-save"), cancel = $("note-cancel"), count = $("note-count");
  let note = data.note, editing = false, saving = false, overwrite = false;
  const waiting = [];

  function el(tag, text) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // `code`, **bold** and bare http(s) links (a trailing full stop or bracket is not the link's)
  const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(https?:\/\/[^\s<>"'`]*[^\s<>"'`.,;:!?)\]])/g;
  function inline(parent, text) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      if (m[1]) parent.appendChild(el("code", m[1].slice(1, -1)));
      else if (m[2]) parent.appendChild(el("strong", m[2].slice(2, -2)));
      else {
        const a = el("a", m[3]);
        a.href = m[3]; // http(s) only, by the pattern: never a javascript: URL
        a.rel = "noopener noreferrer nofollow";
        a.target = "_blank";
        parent.appendChild(a);
      }
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  // Blocks: "# " headings (h3 to h5, under the box's h2), "- " or "* " lists, ``` fenced
  // code, paragraphs split by blank lines with their line breaks kept.
  function render(text) {
    view.replaceChildren();
    if (!text.trim()) {
      view.appendChild(el("p", "No notes yet.")).className = "hint";
      return;
    }
    let list = null, para = null, code = null, codeLines = [];
    for (const line of text.split(/\r\n|\r|\n/)) {
      if (code) {
        if (/^```/.test(line)) {
          code = null;
        } else {
          codeLines.push(line);
          code.textContent = codeLines.join("\n");
        }
        continue;
      }
      const heading = /^(#{1,3})\s+(.*)$/.exec(line), item = /^\s*[-*]\s+(.*)$/.exec(line);
      if (/^```/.test(line)) {
        code = view.appendChild(el("pre"));
        codeLines = [];
        list = para = null;
      } else if (!line.trim()) {
        list = para = null;
      } else if (heading) {
        inline(view.appendChild(el("h" + (heading[1].length + 2))), heading[2]);
        list = para = null;
      } else if (item) {
        if (!list) list = view.appendChild(el("ul"));
        inline(list.appendChild(el("li")), item[1]);
        para = null;
      } else {
        if (para) para.appendChild(el("br"));
        else para = view.appendChild(el("p"));
        inline(para, line);
        list = null;
      }
    }
  }

  function show(state, message, link) {
    box.dataset.state = state;
    status.replaceChildren();
    if (message) status.appendChild(document.createTextNode(message));
    if (link) {
      status.appendChild(document.createTextNode(" "));
      const a = status.appendChild(el("a", link.text));
      a.href = link.href;
      a.target = "_blank"; // signing in elsewhere keeps the text typed here
    }
    status.classList.toggle("error", state === "error");
    status.setAttribute("role", state === "error" ? "alert" : "status");
  }

  function length(text) { return Array.from(text).length; } // characters, as the server counts

  function counted() {
    const n = length(area.value), over = n > data.max;
    count.textContent = n.toLocaleString("en") + " / " + data.max.toLocaleString("en") + " characters";
    count.classList.toggle("error-text", over);
    save.disabled = over || saving;
    area.readOnly = saving; // what is sent is what is shown once it is saved
  }

  function open() {
    editing = true;
    overwrite = false;
    area.value = note.text;
    save.textContent = "Save";
    form.hidden = false;
    view.hidden = true;
    if (edit) edit.hidden = true;
    counted();
    show("editing", "");
    area.focus();
  }

  function close() {
    editing = false;
    form.hidden = true;
    view.hidden = false;
    if (edit) edit.hidden = false;
    delete box.dataset.waiting;
    waiting.splice(0).forEach(function (fn) { fn(); });
  }

  function failed(message, link) {
    saving = false;
    counted();
    show("error", message, link);
  }

  async function submit(event) {
    event.preventDefault();
    if (saving) return;
    const body = { text: area.value };
    if (!overwrite) body.version = note.version;
    saving = true;
    counted();
    show("saving", "Saving…");
    let res, answer = null;
    try {
      res = await fetch(data.url, { method: "PUT", credentials: "same-origin", body: JSON.stringify(body),
        headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": data.csrf } });
      answer = await res.json();
    } catch (e) {
      if (!res) return failed("Not saved: the server could not be reached. Your text is still here; save again.");
    }
    if (res.ok && answer) {
      saving = false;
      note = answer;
      render(note.text);
      close();
      show("saved", "Saved at " + new Date(note.updated_at * 1000).toLocaleTimeString() + ".");
      if (tabs) tabs.postMessage({ url: data.url, note: note });
    } else if (res.status === 409) {
      overwrite = true;
      save.textContent = "Save anyway";
      failed("Not saved: this note was changed elsewhere since you opened it. Your text is still " +
        "here: reload the page to see theirs, or save anyway to replace it.");
    } else if (res.status === 401) {
      failed("Not saved: this server needs its API token for changes. Your text is still here.",
        { href: data.login, text: "Sign in (in a new tab), then save again." });
    } else {
      const field = answer && answer.errors && answer.errors[0];
      failed("Not saved: " + ((field && field.message) || (answer && answer.message) || res.statusText || res.status));
    }
  }

  if (edit) edit.addEventListener("click", open);
  cancel.addEventListener("click", function () {
    if (area.value !== note.text && !window.confirm("Discard your changes to the note?")) return;
    close();
    show("viewing", "");
  });
  form.addEventListener("submit", submit);
  area.addEventListener("input", counted);
  area.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  window.addEventListener("beforeunload", function (event) {
    if (editing && area.value !== note.text) {
      event.preventDefault();
      event.returnValue = ""; // what older browsers need to ask before leaving
    }
  });
  render(note.text);

  // A version of the note saved elsewhere, as the live stream brings it: shown at once, or
  // once the note being typed here is saved or cancelled (a save from here meanwhile is
  // refused as a conflict, so neither text is lost); an older or equal version is stale.
  function receive(saved) {
    if (!saved || typeof saved.version !== "number" || saved.version <= note.version) return;
    const take = function () {
      if (saved.version <= note.version) return;
      note = { text: saved.text, version: saved.version, updated_at: saved.updated_at };
      render(note.text);
      box.dataset.version = String(note.version);
      show("viewing", "Changed elsewhere at " + new Date(note.updated_at * 1000).toLocaleTimeString() + ".");
    };
    if (!editing) return take();
    box.dataset.incoming = String(saved.version);
    window.DnnNotes.whenIdle(take, "This note was changed elsewhere: save anyway to replace it, or cancel to see it.");
  }

  // A page with no live stream (its experiment or trial is over, or the browser fell back
  // to polling) still sees a note saved elsewhere: this browser's other tabs say so at once,
  // and a page brought back into view reads the note again (one small request).
  const tabs = "BroadcastChannel" in window ? new BroadcastChannel("dnnframe-notes") : null;
  if (tabs) tabs.onmessage = function (m) { if (m.data && m.data.url === data.url) receive(m.data.note); };
  let reading = false;
  async function reread() {
    if (reading || document.visibilityState !== "visible") return;
    reading = true;
    try {
      const res = await fetch(data.url, { credentials: "same-origin", headers: { "Accept": "application/json" } });
      if (res.ok) receive(await res.json());
    } catch (e) {
      // offline for a moment: the next return to the page reads again
    } finally {
      reading = false;
    }
  }
  document.addEventListener("visibilitychange", reread);
  window.addEventListener("focus", reread);

  window.DnnNotes = {
    receive: receive,
    // Run fn now, or once the note being edited is saved or its editing cancelled (saying
    // why the page waits, when a reason is given).
    whenIdle: function (fn, reason) {
      if (!editing) return fn();
      waiting.push(fn);
      box.dataset.waiting = "1";
      if (reason && !saving) show("editing", reason);
    },
  };
})();
