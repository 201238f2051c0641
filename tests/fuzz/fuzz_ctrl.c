/* Fuzzes every control message a peer can send the engine (RTS, CTS,
 * MAP_REQ/REP, REG_GONE, GET_REQ, EAGER, PATH, LANE, MBOX, SWITCH, BYE),
 * with descriptors attached, through the socket's handler and the inbox's,
 * against a communicator whose requests the same input posts.  The script
 * format is in ctrl_env.c. */
#include <stddef.h>
#include <stdint.h>

#include "ctrl_env.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet();
    ctrl_env_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return ctrl_env_run(data, size, NULL, NULL) == 0 ? 0 : -1;
}
