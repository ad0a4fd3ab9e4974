"""Pure modules: data in, data out; no process, no cluster, no record store (contract and errors at the bottom)."""
