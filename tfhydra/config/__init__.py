"""The ground floor: what a config is and how a mistake in one is said.

errors.py (the one exception for a user's mistake, and how it is printed in one line), schema.py (the rules of the
keys), paths.py (a path a run reads: a regular file or a directory, never a special file), typed.py (what the typed
option schemas share), registry.py (the one Registry type), contracts.py (types the rooms share), hydra_api.py (the
one door to Hydra's internals), composition.py (a group or value that does not compose, in one line), project.py
(where conf/ and the user's configs are), resolvers.py (the OmegaConf resolvers conf/ names) and jobnames.py (a
sweep job's directory name, which one of them resolves), keras_choice.py (the key `keras` and the process's Keras
chosen from it), bounded.py (YAML and JSON read back from a directory, measured before they are parsed: the trust
boundary's and the record's readers). Imports only the ground floor.
"""
