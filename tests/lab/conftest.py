"""Fixtures shared by the test folders under tests/lab (the drafters' and the training tests)."""
import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """One CPU thread for the whole module, the previous count restored afterwards: the learned drafters' and the
    training tests that ask for it were written and timed that way. A module opts in with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
