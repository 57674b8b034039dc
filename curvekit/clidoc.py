"""The command-line reference (``docs/cli.md``), generated from the click commands.

A test regenerates it and compares, so the reference cannot drift from the code::

    python -m curvekit.clidoc > docs/cli.md

>>> "## curvekit fetch" in cli_reference()
True
"""

from __future__ import annotations

import click

__all__ = ["cli_reference"]


def _option_row(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        required = " (required)" if param.required else ""
        text = (param.help or "").replace("|", "\\|").replace("\n", " ")
        return f"| `{param.human_readable_name}` | Argument{required}: {text.strip()} |"
    assert isinstance(param, click.Option)
    hidden = set(getattr(param, "hidden_aliases", ()))  # old spellings kept for a release
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts] if n not in hidden)
    text = (param.help or "").replace("|", "\\|").replace("\n", " ")
    if isinstance(param.type, click.Choice):
        text += f" One of: {', '.join(f'`{c}`' for c in param.type.choices)}."
    if param.show_default and param.default not in (None, False, ()):
        default = param.default
        if isinstance(default, (tuple, list)):
            default = ", ".join(map(str, default))
        text += f" Default: `{default}`."
    if param.required:
        text += " Required."
    return f"| {names} | {text.strip()} |"


def _command(name: str, command: click.Command, ctx: click.Context) -> list[str]:
    lines = [f"## {name}", ""]
    sub = click.Context(command, info_name=name.split()[-1], parent=ctx)
    usage = " ".join(command.collect_usage_pieces(sub))
    lines += ["```text", f"{name} {usage}".rstrip(), "```", ""]
    if command.help:
        lines += [click.unstyle(command.help).strip().replace("\b\n", ""), ""]
    params = [p for p in command.params
              if p.name != "help" and not (isinstance(p, click.Option) and p.hidden)]
    if params:
        lines += ["| option | description |", "|---|---|", *(_option_row(p) for p in params), ""]
    if isinstance(command, click.Group):
        for child_name, child in sorted(command.commands.items()):
            lines += _command(f"{name} {child_name}", child, sub)
    return lines


def cli_reference() -> str:
    """Markdown for every command and subcommand: usage, help and options."""
    from curvekit.cli import main

    ctx = click.Context(main, info_name="curvekit")
    lines = ["# Command-line reference", "",
             "Generated from the commands themselves (`python -m curvekit.clidoc`); every "
             "command is a thin wrapper over the Python function of the same name.", ""]
    for name, command in sorted(main.commands.items()):
        lines += _command(f"curvekit {name}", command, ctx)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(cli_reference(), end="")
