import NIOCore
import Testing

@testable import API

@Suite struct FormFieldsTests {
    func text(_ fields: FormFields, _ name: String) -> String? {
        fields[name].map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func urlEncoded() throws {
        let fields = try FormFields.parse(
            body: ByteBuffer(string: "cmd=message&text=Hello+world%21%0A%E2%9C%93&empty=&flag&udid=1&udid=2"),
            contentType: "application/x-www-form-urlencoded; charset=UTF-8"
        )
        #expect(text(fields, "cmd") == "message")
        #expect(text(fields, "text") == "Hello world!\n✓")
        #expect(text(fields, "empty") == "")
        #expect(text(fields, "flag") == "")
        #expect(text(fields, "udid") == "2", "a repeated field keeps its last value, as PHP does")
    }

    @Test func badPercentEscapesStayLiteral() {
        #expect(FormFields.percentDecoded(Array("100%zz%4".utf8)) == Array("100%zz%4".utf8))
    }

    @Test func invalidUTF8IsKeptAsBytes() throws {
        let fields = try FormFields.parse(body: ByteBuffer(string: "name=%FF%FE"), contentType: nil)
        #expect(fields["name"] == [0xFF, 0xFE])
    }

    @Test func multipart() throws {
        let body = [
            "preamble is ignored",
            "--XyZ",
            "Content-Disposition: form-data; name=\"cmd\"",
            "",
            "join",
            "--XyZ",
            "content-disposition: form-data; name=\"name\"",
            "Content-Type: text/plain; charset=utf-8",
            "",
            "Ann\r\nMarie",
            "--XyZ",
            "Content-Disposition: form-data; name=\"upload\"; filename=\"a;b.txt\"",
            "",
            "file body",
            "--XyZ--",
            "",
        ].joined(separator: "\r\n")
        let fields = try FormFields.parse(body: ByteBuffer(string: body), contentType: "multipart/form-data; boundary=\"XyZ\"")
        #expect(text(fields, "cmd") == "join")
        #expect(text(fields, "name") == "Ann\r\nMarie")
        #expect(text(fields, "upload") == "file body")
        #expect(fields.values.count == 3)
    }

    @Test func multipartWithoutBoundaryIsRefused() {
        #expect(throws: FormError.missingBoundary) {
            try FormFields.parse(body: ByteBuffer(string: "x"), contentType: "multipart/form-data")
        }
    }

    @Test(arguments: [
        "no delimiter at all",
        "--b\r\nContent-Disposition: form-data; name=\"cmd\"\r\n\r\njoin",
        "--b\r\nContent-Disposition: form-data; name=\"cmd\"",
        "--bjunk",
    ])
    func truncatedMultipartIsRefused(body: String) {
        #expect(throws: FormError.malformedMultipart) {
            try FormFields.parse(body: ByteBuffer(string: body), contentType: "multipart/form-data; boundary=b")
        }
    }

    /// Found by the fuzzer: multipart-kit 4.7.1 traps on a header-name byte above 0x7F. Refused before it gets there.
    @Test func aNonASCIIHeaderNameIsRefusedNotACrash() {
        let body = "--b\r\nContent-Di\u{8D}sposition: form-data; name=\"cmd\"\r\n\r\njoin\r\n--b--\r\n"
        #expect(throws: FormError.malformedMultipart) {
            try FormFields.parse(body: ByteBuffer(string: body), contentType: "multipart/form-data; boundary=b")
        }
        // A header value may hold a bare LF: the next header name starts after its CR LF (found by the fuzzer too).
        let afterValue = "--b\r\nA: x\ny\r\n01\u{C6}9: z\r\n\r\nbody\r\n--b--\r\n"
        #expect(throws: FormError.malformedMultipart) {
            try FormFields.parse(body: ByteBuffer(string: afterValue), contentType: "multipart/form-data; boundary=b")
        }
        // A non-ASCII value (a file name in UTF-8) is fine.
        let utf8 = "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"résumé.txt\"\r\n\r\nx\r\n--b--\r\n"
        #expect(
            (try? FormFields.parse(body: ByteBuffer(string: utf8), contentType: "multipart/form-data; boundary=b"))?.values["f"]
                == Array("x".utf8)
        )
    }

    @Test func otherContentTypesAreRefused() {
        #expect(throws: FormError.unsupportedContentType) {
            try FormFields.parse(body: ByteBuffer(string: "{}"), contentType: "application/json")
        }
    }
}
