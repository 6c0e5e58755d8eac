"""The mock LM provider, for scripts that load it by file path: see :mod:`personalign.testing.mock_provider`.

    import _mock_lm; _mock_lm.register()          # same as personalign.testing.mock_provider.register()

``python benchmarks/_mock_lm.py ARGS...`` runs the ``personalign`` CLI with the provider registered.
"""

from personalign.testing.mock_provider import CALLS, PROVIDER, answer, handler, main, register  # noqa: F401

if __name__ == "__main__":
    main()
