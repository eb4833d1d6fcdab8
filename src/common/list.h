/* Intrusive lists: the node types carry their own links, named prev and
 * next (doubly linked) or next (singly linked); these insert and unlink
 * them, whatever their type. The caller holds whatever lock guards the
 * list. Not installed. */
#ifndef HBG_COMMON_LIST_H
#define HBG_COMMON_LIST_H

#include <stddef.h>

/* Put n first in the doubly linked list at head. */
#define HBG__DLIST_PUSH(head, n)                                               \
  do {                                                                         \
    (n)->prev = NULL;                                                          \
    (n)->next = (head);                                                        \
    if (head)                                                                  \
      (head)->prev = (n);                                                      \
    (head) = (n);                                                              \
  } while (0)

/* Take n (in the list) out of the doubly linked list at head. */
#define HBG__DLIST_UNLINK(head, n)                                             \
  do {                                                                         \
    if ((n)->prev)                                                             \
      (n)->prev->next = (n)->next;                                             \
    else                                                                       \
      (head) = (n)->next;                                                      \
    if ((n)->next)                                                             \
      (n)->next->prev = (n)->prev;                                             \
    (n)->prev = (n)->next = NULL;                                              \
  } while (0)

/* Take n out of the singly linked list at head, if it is there; T is the
 * node type. */
#define HBG__SLIST_UNLINK(T, head, n)                                          \
  do {                                                                         \
    for (T **hbg__pp = &(head); *hbg__pp; hbg__pp = &(*hbg__pp)->next)         \
      if (*hbg__pp == (n)) {                                                   \
        *hbg__pp = (n)->next;                                                  \
        break;                                                                 \
      }                                                                        \
  } while (0)

#endif
