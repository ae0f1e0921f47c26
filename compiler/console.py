"""The console scripts ([project.scripts]): Ctrl-C is exit 130 and one line from flatjob's first
statement on, its imports included.

The CLI's imports (click, pydantic, yaml, the runtime's kubernetes client) take ~0.2 s; a
KeyboardInterrupt raised inside them ended in a traceback, and exit 1 or death by SIGINT
(issue 21). So the first statement here installs a handler that ends the process at once:
nothing has been written yet, and .pyc files are written by rename. Once the command's module
is imported, Ctrl-C raises KeyboardInterrupt again, for the command's own handling (`compile`
keeps its writes atomic, run-local stops its processes) and for `guarded`.

While the command runs, a Ctrl-C that comes while a C extension initialises, or inside the
import system's own code (a command's lazy import), is sent again 5 ms later (`_interrupt`): a
KeyboardInterrupt raised inside an extension's init crashed the process (orjson 3.13: SIGSEGV,
in about 1 of 50 Ctrl-Cs of `flatjob-cmp`), and one raised in the import system's bookkeeping
(a module lock's weakref callback) was printed as "Exception ignored" and lost: the command ran
on to exit 0; any Ctrl-C Python can only print so (a `__del__`, a callback) is sent again too.
One that Python turns into another exception (a RuntimeError from a dataclass's __set_name__)
is still a Ctrl-C, not an internal error (interrupts.by_ctrl_c, in `guarded` and the plugin).

What still escapes this: a signal before the interpreter installs its own handler (it dies of
SIGINT, which a shell shows as 130, with nothing printed), inside `site` (Python's own "Fatal
Python error"), and while the wrapper pip writes imports this module: ~0.45 ms measured from its
first line to the handler (1-2 ms more where bytecode is not cached, PYTHONDONTWRITEBYTECODE),
where the CLI's imports left ~200 ms.
"""

# `_signal` is the C module `signal` wraps, loaded by the interpreter before any script runs:
# importing it costs nothing, while `signal` builds its enums first (~0.6 ms left unguarded).
import _signal
import _thread
import os
import sys
import time

EXIT_INTERRUPTED = 130
MESSAGE = b"interrupted\n"  # as compiler/cli's guarded() says it


def _stop(signum: int = 0, frame: object = None) -> None:
    """The handler while nothing is written: say so in one line and end now."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # a second Ctrl-C cannot cut this short
    try:
        os.write(2, MESSAGE)
    finally:  # stderr closed: the exit status still says it
        os._exit(EXIT_INTERRUPTED)


IMPORT_AGAIN = 0.005  # seconds a Ctrl-C that could not be raised waits before it is sent again
_EXTENSIONS = sys.modules["_frozen_importlib_external"].ExtensionFileLoader  # the import system's, always loaded
_INITS = (_EXTENSIONS.create_module.__code__, _EXTENSIONS.exec_module.__code__)
_IMPORT_SYSTEM = "<frozen importlib._bootstrap"  # the import system's own code (both of its modules)
_deferred = False  # a Ctrl-C came where it could not be raised (_interrupt, _unraisable) and is owed


def _interrupt(signum: int = 0, frame: object = None) -> None:
    """The handler while the command runs: KeyboardInterrupt, except where one cannot be
    survived: in the import system's own code (between taking a module's lock and the block
    that gives it back), or anywhere inside a C extension's module init: the signal is sent
    again a moment later, by when a module's own code (where it unwinds cleanly) or the
    command's runs."""
    global _deferred
    f = frame
    unsafe = f is not None and f.f_code.co_filename.startswith(_IMPORT_SYSTEM)  # type: ignore[attr-defined]
    while f is not None and not unsafe:
        unsafe = f.f_code in _INITS  # type: ignore[attr-defined]
        f = f.f_back  # type: ignore[attr-defined]
    if unsafe:
        _defer()
        return
    _deferred = False
    raise KeyboardInterrupt


def _defer() -> None:
    """Send the Ctrl-C again IMPORT_AGAIN from now; until it is raised, it is owed (_deferred)."""
    global _deferred
    _deferred = True
    _thread.start_new_thread(_again, ())


def _unraisable(hook: object) -> object:
    """sys.unraisablehook while the command runs: a KeyboardInterrupt raised where Python can
    only print it ("Exception ignored in" a __del__ or a weakref callback, as importlib's
    module-lock one) is sent again, not printed and lost; anything else goes to `hook`."""

    def unraisable(what: object) -> None:
        if isinstance(getattr(what, "exc_value", None), KeyboardInterrupt):
            _defer()
        else:
            hook(what)  # type: ignore[operator]

    return unraisable


def _again() -> None:
    """SIGINT to this process once more, IMPORT_AGAIN from now (from a thread of its own)."""
    time.sleep(IMPORT_AGAIN)
    os.kill(os.getpid(), _signal.SIGINT)


# Not when SIGINT was ignored at start (`cmd &`): the interpreter leaves it so, and so does flatjob.
if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _stop)


def _run(module: str, name: str) -> None:
    """Import `module` under the handler above, then call its `name` with Ctrl-C a KeyboardInterrupt
    (where one can be survived: _interrupt);
    end without the interpreter's teardown, which resets the handler (a Ctrl-C there killed
    `flatjob-cmp` by SIGINT after its output was written)."""
    from importlib import import_module

    entry = getattr(import_module(module), name)
    handled = _signal.getsignal(_signal.SIGINT) is _stop
    code: object = 0
    try:
        if handled:
            _signal.signal(_signal.SIGINT, _interrupt)
            sys.unraisablehook = _unraisable(sys.unraisablehook)
        entry()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # one that a command let through (the plugin's, by_ctrl_c)
        _stop()
    finally:
        if handled:
            _signal.signal(_signal.SIGINT, _stop)
    if _deferred:  # the command ended before the deferred Ctrl-C came back: it is not lost
        _stop()
    _exit(code)


def _exit(code: object) -> None:
    """What the interpreter does with SystemExit's code, then os._exit (as compiler/cli's entry())."""
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone (a closed pipe): the output is incomplete
            code = code or 1
    os._exit(code or 0)


def flatjob() -> None:
    """`flatjob`."""
    _run("flatjob.compiler.cli", "entry")


def flatjob_cmp() -> None:
    """`flatjob-cmp`, the Argo CD plugin's generate command."""
    _run("flatjob.compiler.cmp", "main")


def flatjob_ci() -> None:
    """`flatjob-ci`, the GitHub Action's check."""
    _run("flatjob.compiler.ci", "entry")
