"""The restart decision of --max-restarts, in one place (docs/restarts.md): table.py, the exit codes the pod
scripts reserve or decide on (the only place their numbers are written); signs.py, the sign rows derived from
diagnosis/causes.py's table; both rendered into the pod (TAO_EXIT_CODES, TAO_RETRY_SIGNS), where
templates/k8s/gang-restart-entrypoint.sh interprets them and nothing else; history.py, the attempt history
`status`, `explain` and `logs` show.

Pure, as core/ is: data in, data out. It may use core/; core/ uses table.py (it imports only
core/valueclass.py) and signs.py."""
