// AtomicFileWriter: a file written piece by piece appears whole under its name at Commit, never
// before, and a writer dropped before Commit leaves nothing behind.
#include <gtest/gtest.h>

#include <filesystem>

#include "dejaview/base/file_util.h"
#include "testutil.h"

namespace dv {
namespace {

std::string Text(const std::string& path) {
  auto bytes = ReadFileBytes(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? std::string(bytes->begin(), bytes->end()) : "";
}

TEST(AtomicFileWriter, PartsAndAnOverwriteAppearWholeAtCommit) {
  const std::string path = test::ScratchDir() + "/f";
  ASSERT_TRUE(WriteFileAtomic(path, std::string("old")).ok());
  auto file = AtomicFileWriter::Create(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE((*file)->Append("0000", 4).ok());
  ASSERT_TRUE((*file)->Append("abc", 3).ok());
  ASSERT_TRUE((*file)->Append("", 0).ok());
  ASSERT_TRUE((*file)->Append("def", 3).ok());
  ASSERT_TRUE((*file)->WriteAt(1, "12", 2).ok());  // a header field known last
  EXPECT_EQ(Text(path), "old");                    // nothing of it shows before Commit
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(Text(path), "0120abcdef");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ((*file)->Append("x", 1).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ((*file)->Commit().code(), Status::Code::kInvalidArgument);
}

TEST(AtomicFileWriter, DroppedBeforeCommitLeavesNothing) {
  const std::string dir = test::ScratchDir();
  {
    auto file = AtomicFileWriter::Create(dir + "/f");
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    ASSERT_TRUE((*file)->Append("abc", 3).ok());
    EXPECT_TRUE(std::filesystem::exists(dir + "/f.tmp"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(AtomicFileWriter, AFolderThatDoesNotExistIsAnError) {
  auto file = AtomicFileWriter::Create(test::ScratchDir() + "/missing/f");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), Status::Code::kIoError);
  EXPECT_NE(file.status().message().find("missing/f.tmp: open"), std::string::npos)
      << file.status().ToString();
}

}  // namespace
}  // namespace dv
