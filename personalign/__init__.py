"""personalign: compile human-aligned LLM personalization pipelines.

Each personalization stage (relevance selection first) is a DSPy program with a typed
signature, evaluated and optimized against human labels. Importing this package is cheap: it
sets offline defaults and nothing else; heavy libraries load when first used.
"""

from personalign._env import apply_offline_defaults

apply_offline_defaults()

__version__ = "0.1.0"
__all__ = ["__version__"]
