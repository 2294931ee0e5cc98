// Python names above ASCII (grammar/base/unicode_idents.h) against the
// build Python's unicodedata: NFKC of 7,453 names (every character of XID_Continue whose
// NFKD differs, alone, and 3,000 seeded names mixing them with combining marks,
// Hangul jamo and syllables; vectors written by gen_unicode_idents.py with
// Python's unicodedata.normalize), and the XID classes on known characters.
#include "grammar/base/unicode_idents.h"

#include <gtest/gtest.h>

#include <string>

namespace cfgmask {
namespace {

#include "grammar/base/unicode_idents_vectors.inc"

TEST(UnicodeIdents, NfkcIsPythons) {
  size_t changed = 0;
  for (const auto& v : kNfkcVectors) {
    EXPECT_EQ(NfkcName(v[0]), v[1]) << v[0];
    changed += std::string(v[0]) != v[1];
  }
  EXPECT_GT(sizeof(kNfkcVectors) / sizeof(kNfkcVectors[0]), 5000u);
  EXPECT_GT(changed, 4000u);
}

TEST(UnicodeIdents, KnownCases) {
  EXPECT_EQ(NfkcName("\xef\xac\x81le"), "file");            // U+FB01 ligature fi
  EXPECT_EQ(NfkcName("\xef\xbd\x89\xef\xbd\x86"), "if");     // fullwidth
  EXPECT_EQ(NfkcName("e\xcc\x81"), "\xc3\xa9");              // e + U+0301
  EXPECT_EQ(NfkcName("\xe1\x84\x80\xe1\x85\xa1"), "\xea\xb0\x80");  // jamo -> U+AC00
  EXPECT_EQ(NfkcName("plain_ascii9"), "plain_ascii9");
  EXPECT_TRUE(IsXidStart(0xE4));    // a with diaeresis
  EXPECT_FALSE(IsXidStart(0xB7));   // middle dot: continue only
  EXPECT_TRUE(IsXidContinue(0xB7));
  EXPECT_FALSE(IsXidContinue(0x309B));  // katakana voiced sound mark
  EXPECT_FALSE(IsXidStart(0xFF3F));     // fullwidth low line: continue only
  EXPECT_TRUE(IsXidContinue(0xFF3F));
  EXPECT_FALSE(IsXidContinue(0xFF0C));  // fullwidth comma
  EXPECT_TRUE(IsXidStart(0x2118));  // script capital P (Other_ID_Start)
  EXPECT_FALSE(IsXidStart('1'));
  EXPECT_TRUE(IsXidContinue('1'));
}

}  // namespace
}  // namespace cfgmask
