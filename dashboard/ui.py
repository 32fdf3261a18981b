"""Pages: the experiment index, the sweep form, live experiment pages; plotly.js served locally."""

from __future__ import annotations

from typing import Any

from flask import (
    Blueprint,
    current_app,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from dnnframe.datasets import list_datasets
from dnnframe.metrics import metrics_json
from dnnframe.states import ANALYSED_STATES, EXPERIMENT_STATUSES, states_json
from dnnframe.store.notes import MAX_NOTE_CHARS, NoteRecord
from dnnframe.vocabulary import (
    ACTIVATIONS,
    LR_SCHEDULES,
    NORM_POSITIONS,
    NORMALIZATIONS,
    OPTIMIZERS,
    RESIDUALS,
)

from .api_notes import note_json
from .around import spec_around_best
from .assets import serve_plotly
from .compare import MAX_COMPARED, spec_differences
from .context import services
from .errors import APIError
from .formatting import duration, significant
from .forms import CHECKBOX_FIELDS, DEFAULT_FORM, SPEC_TEXT_FIELD, check_form
from .page_data import first_read, page_response
from .params import MEASURED_VALUES
from .ranking import rank_configurations
from .security import (
    check_token_guess,
    csp_nonce,
    csrf_given_matches,
    csrf_token,
    local_path,
    session_signed_in,
    token_digest,
)
from .service import (
    cancel_experiment,
    delete_experiment,
    experiment_json,
    find_experiments,
    spec_yaml,
    submit_spec,
    trial_json,
)
from .summary import dataset_summary, reproduce_commands
from .uploads import upload_response

bp = Blueprint("ui", __name__)
INDEX_PAGE = 50  # experiments per page of the index
bp.add_app_template_filter(significant, "sig")
bp.add_app_template_filter(duration, "duration")


# --------------------------------------------------------------------------- writes
def check_csrf() -> None:
    """Form POSTs must echo the session's token (field ``csrf_token`` or header X-CSRF-Token)."""
    if not csrf_given_matches():
        raise APIError(
            400,
            "the form's CSRF token is missing or stale; reload the page and try again",
            [{"path": "csrf_token", "message": "missing or stale"}],
        )


def token_required() -> bool:
    """True when writes need the API token and this browser session has not given the
    current one (it never signed in, or the token changed since)."""
    return bool(current_app.config.get("API_TOKEN")) and not session_signed_in()


def check_write_allowed() -> None:
    """Form writes: CSRF always; the API token too (once per session) when one is configured,
    so the pages are no way around DNNFRAME_API_TOKEN."""
    check_csrf()
    if token_required():
        raise APIError(
            401, "this server requires its API token for changes: sign in at /login first"
        )


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    """Give the API token once per browser session (only needed when DNNFRAME_API_TOKEN is set)."""
    error = None
    status = 200
    given = request.values.get("next")
    # never redirect off this site
    next_url = local_path(given) or url_for("ui.new_experiment" if not given else "ui.index")
    if request.method == "POST":
        check_csrf()
        expected = str(current_app.config.get("API_TOKEN") or "")
        given = request.form.get("token", "")
        if check_token_guess(given, expected):
            session["token_hash"] = token_digest(expected)
            return redirect(next_url, 303)
        error, status = "that is not the server's API token", 401
    return render_template("login.html", error=error, next_url=next_url), status


def page_vocabulary() -> dict[str, Any]:
    """Trial states, their groups, the metrics with their labels and the default objective,
    for templates and page scripts (which read it from base.html), so neither holds lists
    of their own; ``measured``: the values a diverged trial keeps (dashboard/params.py)."""
    return {**states_json(), **metrics_json(), "measured": list(MEASURED_VALUES)}


@bp.app_context_processor
def _inject() -> dict[str, Any]:
    return {
        "csrf_token": csrf_token,
        "csp_nonce": csp_nonce,
        "config": current_app.config,
        "vocabulary": page_vocabulary(),
    }


# --------------------------------------------------------------------------- assets
@bp.get("/vendor/plotly.min.js")
def plotly_js() -> Any:
    """plotly.js from the installed plotly package (nothing is loaded from the internet),
    compressed once and cached by the browser under its content hash (assets.py)."""
    return serve_plotly()


# --------------------------------------------------------------------------- pages
@bp.get("/")
def index() -> str:
    """All experiments with their progress."""
    query = request.args.get("q", "").strip()[:200]
    status = request.args.get("status", "").upper()
    if status not in EXPERIMENT_STATUSES:
        status = ""
    try:
        offset = max(0, int(request.args.get("offset", 0)))
    except ValueError:
        offset = 0
    exps, more = find_experiments(services().store, query, status, INDEX_PAGE, offset)
    return render_template(
        "index.html",
        experiments=[experiment_json(e) for e in exps],
        query=query,
        status=status,
        statuses=EXPERIMENT_STATUSES,
        offset=offset,
        page_size=INDEX_PAGE,
        more=more,
        deleted=request.args.get("deleted", "")[:100],
    )


def _datasets() -> list[dict[str, Any]]:
    return [d for d in list_datasets() if d["name"] != "csv"]


@bp.route("/experiments/new", methods=["GET", "POST"])
def new_experiment() -> Any:
    """The sweep form; a valid POST submits and goes to the experiment's page."""
    form: dict[str, Any] = dict(DEFAULT_FORM)
    errors: dict[str, str] = {}
    status = 200
    if request.method == "GET" and token_required():
        return redirect(url_for("ui.login", next=request.path))
    if request.method == "GET" and request.args.get("around"):
        form[SPEC_TEXT_FIELD] = spec_yaml(_spec_around(request.args["around"]))
    if request.method == "POST":
        check_write_allowed()
        form = {k: request.form.get(k, "") for k in request.form}
        for field in CHECKBOX_FIELDS:
            form[field] = request.form.getlist(field)
        spec, _data, errors = check_form(request.form)
        if spec is not None:
            result, _created = submit_spec(spec)
            return redirect(url_for("ui.experiment_page", experiment_id=result.experiment.id), 303)
        status = 400
    return render_template(
        "new.html",
        form=form,
        errors=errors,
        datasets=_datasets(),
        activations=list(ACTIVATIONS),
        optimizers=list(OPTIMIZERS),
        residuals=list(RESIDUALS),
        normalizations=list(NORMALIZATIONS),
        norm_positions=list(NORM_POSITIONS),
        lr_schedules=list(LR_SCHEDULES),
    ), status


def _spec_around(experiment_id: str) -> dict[str, Any]:
    """The experiment's spec around its best configuration, by its mean over seeds (404 for
    an unknown id; the spec as it was, renamed, while nothing completed)."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    metric, mode = exp.objective
    trials = store.list_trials(exp.id, state=list(ANALYSED_STATES), fields=["config", "result"])
    ranked = rank_configurations(trials, metric, mode)
    by_id = {t.id: t for t in trials}
    return spec_around_best(exp.spec, by_id[ranked[0].best_trial_id].config if ranked else {})


@bp.post("/uploads")
def upload() -> Any:
    """The form's CSV upload (CSRF-protected; the API's POST /datasets uses the bearer token)."""
    check_write_allowed()
    return upload_response()


@bp.get("/experiments/<experiment_id>")
def experiment_page(experiment_id: str) -> str:
    """Live view of one experiment (the page polls the API's since-cursor)."""
    return _experiment_page(experiment_id)


@bp.get("/experiments/<experiment_id>/page-data")
def experiment_page_data(experiment_id: str) -> Any:
    """The experiment page's first read: its trials and the importance of the metric it
    shows first (``metric``, ``evaluator``), in one response (page_data.py)."""
    return page_response(experiment_id)


def _experiment_page(experiment_id: str, delete_error: str = "", confirm: str = "") -> str:
    """The experiment page; after a refused delete, with its form open, the text typed and
    the reason next to it."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    first = store.list_trials(experiment_id, limit=1, fields=["config"])
    return render_template(
        "experiment.html",
        exp=experiment_json(exp, store, best=True),
        spec_yaml=spec_yaml(exp.spec),
        dataset=dataset_summary(first[0].config if first else None, exp.spec),
        commands=reproduce_commands(
            exp.id, exp.name, request.url_root, bool(current_app.config.get("API_TOKEN"))
        ),
        delete_error=delete_error,
        confirm=confirm,
        first_read=first_read(exp.id, exp.objective[0]),
        note=_note_box(
            store.experiment_note(exp.id), url_for("api.put_experiment_note", experiment_id=exp.id)
        ),
    )


@bp.get("/trials/<trial_id>")
def trial_page(trial_id: str) -> str:
    """One trial: its learning curve, final metrics, timings, config, environment and error."""
    store = services().store
    trial = store.get_trial(trial_id)
    return render_template(
        "trial.html",
        trial=trial_json(trial, full=True),
        note=_note_box(
            store.trial_note(trial.id), url_for("api.put_trial_note", trial_id=trial.id)
        ),
    )


def _note_box(note: NoteRecord, url: str) -> dict[str, Any]:
    """What a page's notes box (_notes.html) needs: the note, where it is saved, how long it
    may be, and whether this session may save it (else the box offers the sign-in page)."""
    return {
        "record": note_json(note),
        "url": url,
        "max": MAX_NOTE_CHARS,
        "editable": not token_required(),
    }


@bp.post("/experiments/<experiment_id>/cancel")
def cancel_page(experiment_id: str) -> Any:
    """The experiment page's cancel button."""
    check_write_allowed()
    cancel_experiment(experiment_id)
    return redirect(url_for("ui.experiment_page", experiment_id=experiment_id), 303)


@bp.post("/experiments/<experiment_id>/delete")
def delete_page(experiment_id: str) -> Any:
    """The experiment page's delete form: the token (when set), CSRF and the typed name (or
    id). A wrong confirmation or an experiment still running shows the page again with the
    reason beside the form, so the reader can correct it there."""
    check_write_allowed()
    confirm = request.form.get("confirm", "")[:200]
    try:
        delete_experiment(experiment_id, confirm)
    except APIError as exc:
        if exc.status not in (400, 409):
            raise
        return _experiment_page(
            experiment_id, delete_error=exc.message, confirm=confirm
        ), exc.status
    return redirect(url_for("ui.index", deleted=experiment_id), 303)


@bp.get("/compare")
def compare_page() -> str:
    """Experiments side by side: their specs' differences, best results and overlaid charts."""
    ids = list(
        dict.fromkeys(
            i.strip() for v in request.args.getlist("ids") for i in v.split(",") if i.strip()
        )
    )
    if not 2 <= len(ids) <= MAX_COMPARED:
        raise APIError(
            400,
            f"choose 2 to {MAX_COMPARED} experiments to compare, but got {len(ids)}",
            [{"path": "ids", "message": f"must name 2 to {MAX_COMPARED} experiments"}],
        )
    store = services().store
    exps = [experiment_json(store.get_experiment(i), store, best=True) for i in ids]
    return render_template(
        "compare.html", exps=exps, differences=spec_differences([e["spec"] for e in exps])
    )
