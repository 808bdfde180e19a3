"""What every command shares: the one-line-error parser and argument types, errors and exit codes, progress bars and plots."""
