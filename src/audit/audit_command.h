/* audit_command: the `exec-server audit` command (verify), see audit_command.c. */
#ifndef EXEC_AUDIT_AUDIT_COMMAND_H
#define EXEC_AUDIT_AUDIT_COMMAND_H

/* argv[0] is "audit". Returns the exit status. */
int audit_command_main(int argc, char **argv);

#endif
