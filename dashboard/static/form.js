// Sweep form: live trial count and field errors from POST /api/v1/validate, CSV upload
// with the label column picked from the file's header.
(function () {
  "use strict";
  const form = document.getElementById("sweep-form");
  if (!form) return;
  const csrf = form.querySelector("input[name=csrf_token]").value;
  const countEl = document.getElementById("trial-count");
  const specEl = document.getElementById("spec-json");
  const submitBtn = document.getElementById("submit");
  let timer = null;
  let generation = 0;
  let uploadError = "";
  let lastSpec = null;  // the spec of the latest validation, for "start from the form's spec"
  const specText = document.getElementById("spec_text");
  const specBox = document.getElementById("spec-box");
  const formFields = document.getElementById("form-fields");

  // A spec in the box is what is submitted: the fields it sets aside are hidden.
  function showMode() {
    const fromBox = specText.value.trim() !== "";
    formFields.hidden = fromBox;
    document.getElementById("spec-preview").hidden = fromBox;
    document.getElementById("use-form").hidden = !fromBox;
  }

  // POST to this server and read its JSON answer; an answer that is not JSON (a proxy's error
  // page, say) still gives a message naming the HTTP status, not "cannot reach the server".
  async function postJSON(url, body, headers) {
    let res;
    try {
      res = await fetch(url, { method: "POST", body: body,
        headers: Object.assign({ "Accept": "application/json", "X-CSRF-Token": csrf }, headers || {}) });
    } catch (e) {
      return { ok: false, data: { message: "cannot reach the server" } };
    }
    let data;
    try {
      data = await res.json();
    } catch (e) {
      data = { message: "the server answered HTTP " + res.status + " " + res.statusText };
    }
    return { ok: res.ok, status: res.status, data: data };
  }

  function showErrors(fields) {
    fields = Object.assign({}, fields || {});
    if (uploadError) fields.upload = uploadError;
    for (const el of form.querySelectorAll(".field-error[data-field]")) {
      el.textContent = (fields && fields[el.dataset.field]) || "";
    }
    for (const input of form.querySelectorAll("input, select, textarea")) {
      const name = input.name || input.id;
      input.classList.toggle("invalid", Boolean(fields && fields[name]));
    }
  }

  async function validate() {
    const mine = ++generation;
    const body = new URLSearchParams(new FormData(form));
    const answer = await postJSON(form.getAttribute("data-validate-url"), body);
    const data = answer.data;
    if (mine !== generation) return; // a newer edit already asked
    if (!data.valid && !data.fields) {
      countEl.textContent = data.message || "the server refused the form";
      countEl.className = "count bad";
      return;
    }
    if (data.spec) lastSpec = data.spec;
    if (data.valid) {
      showErrors({});
      countEl.textContent = data.n_trials + (data.n_trials === 1 ? " trial" : " trials");
      countEl.className = "count ok";
      specEl.textContent = JSON.stringify(data.spec, null, 2);
    } else {
      showErrors(data.fields || {});
      countEl.textContent = "fix the highlighted fields";
      countEl.className = "count bad";
      specEl.textContent = data.spec ? JSON.stringify(data.spec, null, 2) : "";
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(validate, 250);
  }

  const dataset = document.getElementById("dataset");
  const csvFields = document.getElementById("csv-fields");
  dataset.addEventListener("change", function () {
    csvFields.hidden = dataset.value !== "csv";
  });

  const fileInput = document.getElementById("csv-file");
  const labelSelect = document.getElementById("label_column");
  const uploadInput = document.getElementById("upload");
  const info = document.getElementById("upload-info");
  fileInput.addEventListener("change", async function () {
    const file = fileInput.files[0];
    if (!file) return;
    info.textContent = "uploading " + file.name + "…";
    const body = new FormData();
    body.append("file", file);
    const answer = await postJSON(form.getAttribute("data-upload-url"), body);
    const data = answer.data;
    if (!answer.ok) {
      uploadInput.value = "";
      info.textContent = "";
      uploadError = "upload failed: " + (data.message || "the server refused the file");
      showErrors({});
      schedule();
      return;
    }
    uploadError = "";
    uploadInput.value = data.id;
    info.textContent = file.name + ": " + data.rows + " rows, columns " + data.header.join(", ");
    labelSelect.innerHTML = "";
    for (const col of data.header) {
      const opt = document.createElement("option");
      opt.value = opt.textContent = col;
      labelSelect.appendChild(opt);
    }
    // the label is the one non-numeric column, or by convention the last column
    const guess = data.label_candidates.length === 1 ? data.label_candidates[0] : data.header[data.header.length - 1];
    labelSelect.value = guess;
    schedule();
  });

  document.getElementById("edit-spec").addEventListener("click", function () {
    if (lastSpec) specText.value = JSON.stringify(lastSpec, null, 2);
    specBox.open = true;
    showMode();
    schedule();
    specText.focus();
  });
  document.getElementById("use-form").addEventListener("click", function () {
    specText.value = "";
    showMode();
    schedule();
  });
  specText.addEventListener("input", showMode);
  showMode();

  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("submit", function () { submitBtn.disabled = true; submitBtn.textContent = "Submitting…"; });
  validate();
})();
