"""biobench: benchmark, CLM-detour pretraining recipe and leaderboard for biomedical text encoders."""

from biobench.errors import BiobenchError

__version__ = "0.1.0"
__all__ = ["BiobenchError", "__version__"]
