"""Progress on stderr: a bar redrawn on a terminal, one line per finished item elsewhere."""

from __future__ import annotations

import io

from policyd.cli.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_each_finished_item_is_one_line() -> None:
    stream = io.StringIO()
    progress = Progress(2, stream, prefix="policyd simulate: ")
    progress.start("a")
    assert stream.getvalue() == ""  # nothing until something is done
    progress.finish("a: 5.3% sooner")
    progress.start("b")
    progress.finish("b: no different")
    progress.close()
    assert stream.getvalue() == ("policyd simulate: 1/2 a: 5.3% sooner\n"
                                 "policyd simulate: 2/2 b: no different\n")


def test_on_a_terminal_one_bar_is_redrawn_in_place() -> None:
    stream = Terminal()
    progress = Progress(2, stream, width=4)
    progress.start("a")
    progress.finish("a: 5.3% sooner")
    progress.start("b")
    progress.finish("b: no different")
    progress.close()
    assert stream.getvalue() == ("\r\033[K[....] 0/2 a\r\033[K[##..] 1/2 b"
                                 "\r\033[K[####] 2/2 done\n")
