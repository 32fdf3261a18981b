"""The CLI reference page, walked from the click objects themselves (``dnnframe.cli.cli``):
every command, its usage, arguments and options with their types, defaults and help.

Written here rather than with mkdocs-click, which prints click 8.3's unset-default
sentinel ("Sentinel.UNSET") as a default value.
"""

from __future__ import annotations

import inspect

import click
from schema_text import cell

from dnnframe.cli import cli

PROG = "dnnframe"

INTRO = """\
# CLI reference

Generated at build time from the click commands (`dnnframe.cli`). Every command reads its
store from `--store` or `DNNFRAME_STORE_URL` (default `sqlite:///dnnframe.db`). Errors a
user can fix are one line, never a traceback, with exit code 2 for an invalid spec or usage
and 1 for everything else; a run stopped by Ctrl-C exits 130, by SIGTERM 143. Results go to
stdout, progress and messages to stderr.
"""


def commands() -> dict[str, click.Command]:
    """Every command of the CLI by name (the group has one level of commands)."""
    ctx = click.Context(cli, info_name=PROG)
    return {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}


def command_anchor(name: str) -> str:
    return f"{PROG}-{name}"


def _default(param: click.Parameter, ctx: click.Context) -> str:
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return ""
    value = param.get_default(ctx, call=False)
    if value is None or value == () or callable(value):
        return ""
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return f"`{value}`"


def _type(param: click.Parameter, ctx: click.Context) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    if isinstance(param.type, click.Choice):
        return " or ".join(f"`{choice}`" for choice in param.type.choices)
    if isinstance(param.type, click.types._NumberRangeBase):
        info = param.type.to_info_dict()
        bounds = (
            [f"{'>' if info['min_open'] else '>='} {info['min']}"]
            if info["min"] is not None
            else []
        )
        if info["max"] is not None:
            bounds.append(f"{'<' if info['max_open'] else '<='} {info['max']}")
        return f"{param.type.name.split()[0]}, {', '.join(bounds)}"
    return param.type.get_metavar(param, ctx) or param.type.name


def _names(param: click.Parameter) -> str:
    names = [*param.opts, *param.secondary_opts]
    return " / ".join(f"`{name}`" for name in names)


def _command(name: str, command: click.Command) -> list[str]:
    ctx = click.Context(command, info_name=f"{PROG} {name}", parent=None)
    usage = " ".join(command.collect_usage_pieces(ctx))
    out = [
        f"## `{PROG} {name}` {{#{command_anchor(name)}}}",
        "",
        inspect.cleandoc(click.unstyle(command.help or command.short_help or "")),
        "",
        "```text",
        f"{PROG} {name} {usage}",
        "```",
        "",
    ]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
    if arguments:
        out += ["| argument | type | required |", "| --- | --- | --- |"]
        out += [
            f"| `{p.human_readable_name}` | {cell(_type(p, ctx))} "
            f"| {'yes' if p.required else 'no'} |"
            for p in arguments
        ]
        out.append("")
    out += ["| option | type | default | description |", "| --- | --- | --- | --- |"]
    for p in options:
        envvar = f" (env `{p.envvar}`)" if isinstance(p.envvar, str) else ""
        out.append(
            f"| {_names(p)} | {cell(_type(p, ctx))} | {cell(_default(p, ctx))} "
            f"| {cell((p.help or '') + envvar)} |"
        )
    out.append("| `--help` | flag |  | show the command's help and exit |")
    return out + [""]


def cli_page() -> str:
    out = [INTRO, "| command | what it does |", "| --- | --- |"]
    found = commands()
    out += [
        f"| [`{PROG} {name}`](#{command_anchor(name)}) "
        f"| {cell(command.get_short_help_str(limit=120))} |"
        for name, command in found.items()
    ]
    out.append("")
    for name, command in found.items():
        out += _command(name, command)
    return "\n".join(out) + "\n"
