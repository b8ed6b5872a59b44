"""The command-line tools, kept apart from the runtime's layers (dtype, shape, graph, ops,
tensor, nn, compiler/, runtime/, backends/, models/): nothing here is imported by `import webrlx`.

serve       `python -m webrlx serve`: web/ pages, the local Pyodide and the wheel on 127.0.0.1
lite        `python -m webrlx lite`: build and serve the JupyterLite site for notebooks/
bench       `python -m webrlx bench`: benchmarks printed as JSON
web_assets  `python -m webrlx.cli.web_assets`: build the offline Pyodide and wheels under build/
dawn        `python -m webrlx dawn`: python, pytest or bench in Pyodide over Dawn in Node
"""
