// The secret key words, written once. A key whose name ends in one of these words (PGPASSWORD,
// SecretAccessKey, AWS_SESSION_TOKEN, X-Amz-Signature, private_key_id) has its value masked, whatever the
// quoting around the key and the value: KEY=v, key: v, "key": "v", 'key': b'v', \"key\": \"v\" (JSON inside
// a string), argv lists ['--key', 'v'], --key v, AccountKey=v; (connection strings), ?sig=v&... (URLs).
// masker.cpp builds its RE2 rules from this table; nothing else lists these words.
//
// Each entry is an RE2 fragment (case-insensitive, no capturing groups) matched at the end of the key name.
#pragma once

namespace ff::mask::detail {

inline constexpr const char* kSecretKeyWords[] = {
    "password",        "passwd",         "pwd",           "passphrase",   "[_-]pass",
    "token",           "secret",         "api[_-]?key",   "apikey",       "access[_-]?key",
    "private[_-]?key", "private[_-]?key[_-]?id",          "account[_-]?key",
    "shared[_-]?access[_-]?key",         "signature",     "sig",          "credentials?",
    "client[_-]?secret", "auth",         "cookie",        "session[_-]?id",
};

}  // namespace ff::mask::detail
