"""``python -m memstrata``: the same as the ``memstrata`` console script."""

from memstrata.cli import main

if __name__ == "__main__":
    main()
