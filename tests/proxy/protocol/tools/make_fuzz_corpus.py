#!/usr/bin/env python3
# Writes the seed corpora of tests/fuzz (fuzz_client_packets, fuzz_server_packets) from the
# recorded packets in tests/proxy/protocol/captures_*.hpp. Usage: make_fuzz_corpus.py REPO_ROOT
import os
import re
import struct
import sys

root = sys.argv[1]
here = os.path.join(root, 'tests/proxy/protocol')


def captures(name):
    text = open(os.path.join(here, name)).read()
    arrays = {}
    for m in re.finditer(r'inline constexpr captured_frame (\w+)\[\] = \{\n(.*?)\n\};', text, re.S):
        arrays[m.group(1)] = [(d, bytes.fromhex(h)) for d, h in
                              re.findall(r"\{'(.)', \"([0-9a-f]*)\"\}", m.group(2))]
    singles = {m.group(1): bytes.fromhex(m.group(2)) for m in
               re.finditer(r'inline constexpr std::string_view (\w+) =\n    "([0-9a-f]+)";', text)}
    return arrays, singles


maria, _ = captures('captures_mariadb.hpp')
_, libm = captures('captures_libmariadb.hpp')


def payload(frame):
    return frame[4:]


def stream(frames):
    return b''.join(f for _, f in frames)


client = {
    'stream_two_result_sets': b'\x00' + stream(maria['query_two_result_sets_eof']),
    'handshake_libmariadb': b'\x01' + payload(libm['handshake_response_with_db_and_attrs']),
    'ssl_request': b'\x01' + struct.pack('<IIB', 0x0000aa05, 1 << 24, 33) + b'\0' * 23,
    'query': b'\x02' + payload(maria['query_two_result_sets_eof'][0][1]),
    'fetch': b'\x02' + payload(libm['fetch_2_rows']),
    'long_data': b'\x02' + payload(libm['send_long_data_1']),
    'execute_types': b'\x03' + struct.pack('<HBB', 12, 0, 0) +
                     payload(libm['execute_12_params_with_types']),
    'execute_no_types': b'\x03' + struct.pack('<HBB', 12, 1, 0) +
                        payload(libm['execute_12_params_types_not_resent']),
    'execute_long_data': b'\x03' + struct.pack('<HBB', 12, 3, 0) +
                         payload(libm['execute_12_params_param_6_long_data']),
}


def after_command(frames):
    return stream(frames[1:])


deof = 0x04
server = {
    'greeting': b'\x00\x03' + payload(maria['greeting_and_login_with_db_and_attrs'][0][1]),
    'ok_session_state': b'\x00\x03' + payload(maria['init_db_eof'][1][1]),
    'err': b'\x00\x01' + payload(maria['query_err_eof'][1][1]),
    'column_definition': b'\x01\x00' + payload(maria['query_ok_then_rows_eof'][3][1]),
    'column_extended_metadata': b'\x01\x01' + payload(maria['query_extended_metadata_deof'][3][1]),
    'text_row': b'\x02\x13' + payload(maria['query_types_text_eof'][22][1]),
    'binary_row': b'\x03\x0c\x00' + payload(libm['binary_row_12_columns']),
    'exchange_two_result_sets': b'\x04\x00\x00' + bytes([deof | 3]) +
                                after_command(maria['query_two_result_sets_deof']),
    'exchange_local_infile': b'\x04\x00\x00\x03' + after_command(maria['local_infile_eof']),
    'exchange_prepare': b'\x04\x00\x02\x03' + after_command(maria['prepare_2_params_3_columns_eof']),
    'exchange_execute_cursor': b'\x04\x00\x01' + bytes([deof | 3]) +
                               after_command(maria['execute_cursor_deof']),
    'auth_switch': b'\x05\x00' + stream(maria['login_auth_switch'][2:]),
}

for target, seeds in (('fuzz_client_packets', client), ('fuzz_server_packets', server)):
    d = os.path.join(root, 'tests/fuzz/corpus', target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), 'wb') as fh:
            fh.write(data)
