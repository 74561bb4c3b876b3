// Invalid exhausted/duplicate answers: codes, SQLSTATEs, messages, types, with exact line:column.
#include "tests/rules/model/load_test_util.hpp"

namespace claimguard::rules::test {
namespace {

// The stock rule's exhausted answer in block form: its fields start on line 7, column 7.
std::string exhausted(const std::string& lines) { return with_stock_lines("    exhausted:\n" + lines); }

const std::string client_code_message =
    " is a client-library error (2000-2999, e.g. 2013 Lost connection) that drivers treat as a broken "
    "connection; use a server code such as 1644";

const error_case answer_cases[] = {
    {"code_zero", exhausted("      code: 0\n"), {"7:13: code is '0', outside the range 1 to 65535"}},
    {"code_too_large", exhausted("      code: 65536\n"), {"7:13: code is '65536', outside the range 1 to 65535"}},
    {"code_negative", exhausted("      code: -1\n"), {"7:13: code is '-1', outside the range 1 to 65535"}},
    {"code_huge", exhausted("      code: 99999999999999999999999\n"),
     {"7:13: code is '99999999999999999999999', outside the range 1 to 65535"}},
    {"code_client_library_2013", exhausted("      code: 2013\n"), {"7:13: code 2013" + client_code_message}},
    {"code_client_library_2000", exhausted("      code: 2000\n"), {"7:13: code 2000" + client_code_message}},
    {"code_client_library_2999", exhausted("      code: 2999\n"), {"7:13: code 2999" + client_code_message}},
    {"code_text", exhausted("      code: abc\n"), {"7:13: code must be a whole number such as 1644, not 'abc'"}},
    {"code_empty", exhausted("      code:\n"), {"7:7: code has no value; it needs a whole number such as 1644"}},
    {"sqlstate_four_characters", exhausted("      sqlstate: \"4500\"\n"),
     {"7:17: sqlstate '4500' must be 5 characters, such as 45000"}},
    {"sqlstate_six_characters", exhausted("      sqlstate: 450001\n"),
     {"7:17: sqlstate '450001' must be 5 characters, such as 45000"}},
    {"sqlstate_lower_case", exhausted("      sqlstate: hy000\n"),
     {"7:17: sqlstate 'hy000' may hold only digits and upper-case letters, such as 45000"}},
    {"sqlstate_punctuation", exhausted("      sqlstate: \"45-00\"\n"),
     {"7:17: sqlstate '45-00' may hold only digits and upper-case letters, such as 45000"}},
    {"sqlstate_success_class", exhausted("      sqlstate: \"00000\"\n"),
     {"7:17: sqlstate '00000' is in class 00, which means success; an error needs another class, such as 45000"}},
    {"sqlstate_list", exhausted("      sqlstate: [45000]\n"),
     {"7:17: sqlstate needs a 5-character SQLSTATE such as 45000, not a list"}},
    {"message_empty", exhausted("      message: \"\"\n"),
     {"7:16: message is empty; write the text the app should receive"}},
    {"message_too_long", exhausted("      message: " + std::string(513, 'x') + "\n"),
     {"7:16: message is 513 bytes long; it may be at most 512"}},
    {"message_line_break", exhausted("      message: \"sold\\nout\"\n"),
     {"7:16: message contains a control character or invalid UTF-8; keep it to one line of plain text"}},
    {"message_folded_block_ends_in_newline", exhausted("      message: >\n        sold out\n"),
     {"7:16: message contains a control character or invalid UTF-8; keep it to one line of plain text"}},
    {"message_mapping", exhausted("      message: {text: x}\n"),
     {"7:16: message needs the text the app receives, not a mapping"}},
    {"type_unknown", exhausted("      type: maybe\n"), {"7:13: type must be error or ok, not 'maybe'"}},
    {"type_empty", exhausted("      type:\n"), {"7:7: type has no value; it needs error or ok"}},
    {"ok_with_code", exhausted("      type: ok\n      code: 1644\n"),
     {"8:7: an ok answer sends no code; remove it or set type: error"}},
    {"ok_with_sqlstate_and_message", exhausted("      type: ok\n      sqlstate: 45000\n      message: x\n"),
     {"8:7: an ok answer sends no sqlstate; remove it or set type: error",
      "9:7: an ok answer sends no message; remove it or set type: error"}},
    {"ok_type_written_last", exhausted("      message: x\n      type: ok\n"),
     {"7:7: an ok answer sends no message; remove it or set type: error"}},
    {"answer_unknown_field_hint", exhausted("      sql_state: 45000\n"),
     {"7:7: unknown field 'sql_state' in the exhausted answer; did you mean 'sqlstate'?"}},
    {"answer_unknown_field_list", exhausted("      reason: x\n"),
     {"7:7: unknown field 'reason' in the exhausted answer; its fields are: type, code, sqlstate, message"}},
    {"answer_duplicate_field", exhausted("      code: 1\n      code: 2\n"),
     {"8:7: code is set twice in the exhausted answer (first on line 7); keep one"}},
    {"answer_list", with_stock_lines("    exhausted: [error]\n"),
     {"6:16: exhausted needs a mapping with type, code, sqlstate and message, not a list"}},
    {"answer_unknown_shorthand", with_stock_lines("    exhausted: soldout\n"),
     {"6:16: exhausted must be ok, error, or a mapping with type, code, sqlstate and message, not 'soldout'"}},
    {"answer_several_errors", exhausted("      code: 0\n      sqlstate: x\n      message: \"\"\n"),
     {"7:13: code is '0', outside the range 1 to 65535", "8:17: sqlstate 'x' must be 5 characters, such as 45000",
      "9:16: message is empty; write the text the app should receive"}},
    {"duplicate_answer_client_code", with_claim_lines("    duplicate:\n      code: 2006\n"),
     {"12:13: code 2006" + client_code_message}},
    {"duplicate_answer_alias_hint", with_claim_lines("    duplicate: {errno: 1062}\n"),
     {"11:17: unknown field 'errno' in the duplicate answer; did you mean 'code'?"}},
};

class answer_errors : public testing::TestWithParam<error_case> {};
TEST_P(answer_errors, reports_exactly) { expect_errors(GetParam()); }
INSTANTIATE_TEST_SUITE_P(answers, answer_errors, testing::ValuesIn(answer_cases), case_name);

}  // namespace
}  // namespace claimguard::rules::test
