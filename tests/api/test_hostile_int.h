/* What test_hostile.c and test_hostile_env.c, linked into one executable,
 * share. */
#ifndef IPCP_TEST_HOSTILE_INT_H
#define IPCP_TEST_HOSTILE_INT_H

/* Runs the one-process case name (test_hostile_env.c); -1: it is not
 * one. */
int hostile_solo(const char *name);

#endif
