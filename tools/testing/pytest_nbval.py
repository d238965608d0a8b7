"""pytest plugin: nbval runs cells the way Jupyter does, so a trailing ';' hides a result as in the stored notebook."""

from __future__ import annotations

from nbval.kernel import RunningKernel


def execute_with_history(self, cell_input, allow_stdin=None):
    """Send a cell with store_history=True: IPython reads the ';' that silences a result from its history."""
    return self.kc.execute(cell_input, store_history=True, allow_stdin=allow_stdin, stop_on_error=False)


def pytest_configure(config):
    """Replace nbval 0.11's store_history=False execution, under which `plot(...);` still prints its result."""
    RunningKernel.execute_cell_input = execute_with_history
