/* The policy table: adding a policy is its file and one line here. */
#include "core/policy/policy.h"

const hbg__policy_ops *const hbg__policies[HBG_POLICY__COUNT] = {
    [HBG_POLICY_DEFERRED] = &hbg__policy_deferred,
    [HBG_POLICY_PINNED_EAGER] = &hbg__policy_pinned_eager,
    [HBG_POLICY_COALESCED] = &hbg__policy_coalesced,
    [HBG_POLICY_PINNED_BULK] = &hbg__policy_pinned_bulk,
};
