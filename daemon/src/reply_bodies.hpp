#pragma once
// A per-thread spare buffer for reply bodies, shared by the server and the routes inside ergd.

#include <string>

namespace erg::daemon {

/// A string to build a reply body in, from this thread's spare. A connection thread gives each
/// reply's body back once it has been serialized (give_back_reply_body), so a thread answering
/// one request after another builds every body in one buffer instead of allocating one each.
/// Bodies over 64 KiB are not kept.
std::string take_reply_body();
void give_back_reply_body(std::string&& body);

}  // namespace erg::daemon
