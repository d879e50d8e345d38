"""The engine and its records, without Qt. Sub-packages, bottom to top (each imports only
those below it; pyproject.toml's import contracts check it):

trace < metrics, models < decoding < drafters < lab < engine < tune

(the engine shows the lab's view of its own position; a sweep runs engines)
"""
