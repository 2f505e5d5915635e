import errno
import os
import sys

from lab.cli import main

try:
    status = main()
    if sys.stdout is not None:  # None when the shell closed it (`>&-`): print() then writes nothing
        sys.stdout.flush()
except BrokenPipeError:
    # The reader went away (`python -m lab demo | head`): stop quietly, as Unix tools do, and keep Python from
    # reporting the failed flush of stdout at exit.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
except OSError as error:
    if error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF):
        raise
    # stdout cannot take the output (`> /dev/full`, a full disk): one line, not a traceback from print()
    if sys.stdout is not None:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the flush at exit would fail again
    print(f"python -m lab: cannot write the output: {error.strerror}", file=sys.stderr)
    status = 1
except KeyboardInterrupt:
    # Ctrl-C mid-run (a demo in front of a class): one line, not a page of torch's stack; 130 = 128 + SIGINT,
    # the shell's status for a command stopped by Ctrl-C
    sys.stdout.flush()
    print("\ninterrupted (Ctrl-C): stopped before the run finished, so nothing was summarised", file=sys.stderr)
    status = 130
sys.exit(status)
