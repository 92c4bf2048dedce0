"""The hostile-input suite's one assertion: exit 2, one located ``error:`` line, no traceback."""

from __future__ import annotations

from typer.testing import CliRunner

from simkv.cli import app

runner = CliRunner()


def one_error(args: list[str], place: str) -> str:
    """Run ``simkv ARGS``: exit 2 with one ``error:`` line that names ``place``, no traceback;
    the line without its ``error: `` prefix."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    assert place in lines[0], lines[0]
    return lines[0].removeprefix("error: ")


def succeeds(args: list[str]) -> str:
    """Run ``simkv ARGS``: exit 0; its output."""
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def errors(args: list[str]) -> list[str]:
    """Run ``simkv ARGS``: exit 2, only ``error:`` lines, no traceback; the lines without the
    prefix."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert all(line.startswith("error: ") for line in lines), result.output
    return [line.removeprefix("error: ") for line in lines]
