"""Support code for the rust-codecontests environment (protected: do not edit).

- rcc.client:  a small OpenAI-compatible chat client; `solve` receives one.
- rcc.rust:    compile a Rust program with rustc and run it against tests.
- rcc.standin: the local stand-in model server (deterministic, see its docstring).
- rcc.proxy:   the metering proxy between your scaffold and the model.
- rcc.runner:  runs your scaffold on a list of problems and grades the answers.
"""
