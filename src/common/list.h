/* Intrusive circular doubly linked list. */
#ifndef IPCP_COMMON_LIST_H
#define IPCP_COMMON_LIST_H

#include "util.h"

typedef struct ipcp__list {
    struct ipcp__list *prev, *next;
} ipcp__list_t;

static inline void ipcp__list_init(ipcp__list_t *head)
{
    head->prev = head->next = head;
}

static inline int ipcp__list_empty(const ipcp__list_t *head)
{
    return head->next == head;
}

static inline void ipcp__list_insert_after(ipcp__list_t *pos, ipcp__list_t *e)
{
    e->prev = pos;
    e->next = pos->next;
    pos->next->prev = e;
    pos->next = e;
}

static inline void ipcp__list_push_back(ipcp__list_t *head, ipcp__list_t *e)
{
    ipcp__list_insert_after(head->prev, e);
}

static inline void ipcp__list_del(ipcp__list_t *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = e;
}

static inline ipcp__list_t *ipcp__list_pop_front(ipcp__list_t *head)
{
    ipcp__list_t *e = head->next;
    if (e == head)
        return NULL;
    ipcp__list_del(e);
    return e;
}

/* Moves every element of src to the empty list dst; src is left empty. */
static inline void ipcp__list_move_all(ipcp__list_t *dst, ipcp__list_t *src)
{
    ipcp__list_init(dst);
    if (ipcp__list_empty(src))
        return;
    *dst = *src;
    dst->next->prev = dst;
    dst->prev->next = dst;
    ipcp__list_init(src);
}

#define ipcp__list_entry(ptr, type, member)                                    \
    ipcp__container_of(ptr, type, member)

#define ipcp__list_for_each_safe(pos, tmp, head)                               \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);           \
         (pos) = (tmp), (tmp) = (pos)->next)

#endif
