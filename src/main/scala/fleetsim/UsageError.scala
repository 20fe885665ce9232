package fleetsim

/** A user's mistake in a command, its flags or the files they name: one line, exit code 2, and the
  * `--help` of `command` ("" for none) to turn to.
  */
final class UsageError(message: String, val command: String) extends Exception(message)

/** The machine or the network cannot run this as asked: a port is taken, the fleet does not fit. Exit code 1. */
final class CannotRun(message: String) extends Exception(message)
