"""The command line: the process entry (main), the typer app, start-up checks, completion and printing."""
