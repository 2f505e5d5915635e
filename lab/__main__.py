import os
import sys

from lab.cli import main

try:
    status = main()
    sys.stdout.flush()
except BrokenPipeError:
    # The reader went away (`python -m lab demo | head`): stop quietly, as Unix tools do, and keep Python from
    # reporting the failed flush of stdout at exit.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    status = 1
except KeyboardInterrupt:
    # Ctrl-C mid-run (a demo in front of a class): one line, not a page of torch's stack; 130 = 128 + SIGINT,
    # the shell's status for a command stopped by Ctrl-C
    sys.stdout.flush()
    print("\ninterrupted (Ctrl-C): stopped before the run finished, so nothing was summarised", file=sys.stderr)
    status = 130
sys.exit(status)
