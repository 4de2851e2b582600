/* fleet_command: `exec-server registry ...`, the entry point main() hands argv to.
 *
 *   exec-server registry --database URL [--listen URL] ...   serve (fleet_server)
 *   exec-server registry token create --environment ID --role executor|harness
 *                                     [--expires 30d]        prints one bearer token
 *   exec-server registry token list                          id, role, environment, dates
 *   exec-server registry token revoke ID
 *   exec-server registry environments                        online, node, last seen,
 *                                                            streams
 *
 * The commands open the database directly (SQLite: beside a running registry, WAL
 * lets them; PostgreSQL: any host that reaches it) and run its migrations first.
 * Exit status: 0 done, 1 a runtime failure (the database), 2 a usage error. */
#ifndef EXEC_FLEET_COMMAND_H
#define EXEC_FLEET_COMMAND_H

/* argv[0] is "registry". */
int fleet_command_main(int argc, char **argv);

#endif
