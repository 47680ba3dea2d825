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

    /// A 64 KiB body of delimiters inside header values: unbounded, every delimiter restarted a walk of the header
    /// lines to the end of the body (the square of its size, ~4×10⁷ steps). Now the work is linear: this body is
    /// refused after a few dozen delimiters, and costs about what a plain form of the same size costs. A ratio of
    /// the best of several runs each, not an absolute time.
    @Test func aBodyOfDelimitersCostsWhatAPlainBodyOfItsSizeCosts() throws {
        let hostile = "--a\r\n" + String(repeating: "X:--a\r\n", count: 9_300) + "X:--a--"
        let value = String(repeating: "x", count: hostile.utf8.count - 60)
        let plain = "--a\r\nContent-Disposition: form-data; name=\"msg\"\r\n\r\n\(value)\r\n--a--\r\n"
        let refused = #expect(throws: FormError.self) {
            try FormFields.parse(body: ByteBuffer(string: hostile), contentType: "multipart/form-data; boundary=a")
        }
        #expect(refused == .headersTooLong || refused == .tooManyParts)
        let short = "--a\r\n" + String(repeating: "X:--a\r\n\r\n", count: 100) + "--a--"
        #expect(throws: FormError.tooManyParts) {
            try FormFields.parse(body: ByteBuffer(string: short), contentType: "multipart/form-data; boundary=a")
        }
        #expect(
            try FormFields.parse(body: ByteBuffer(string: plain), contentType: "multipart/form-data; boundary=a")["msg"]?.count
                == value.utf8.count
        )
        func best(_ body: String) -> Duration {
            let buffer = ByteBuffer(string: body)
            return (0..<5).map { _ in
                ContinuousClock().measure { _ = try? FormFields.parse(body: buffer, contentType: "multipart/form-data; boundary=a") }
            }.min()!
        }
        let (hostileTime, plainTime) = (best(hostile), best(plain))
        #expect(hostileTime < plainTime * 10, "hostile \(hostileTime), plain \(plainTime)")
    }

    /// Fewer delimiters, each followed by one long header line: each walk stops at the cap on a header block.
    @Test func aHeaderBlockLongerThanTheCapIsRefused() {
        let long = "--a\r\nX: " + String(repeating: "v", count: FormFields.maxHeaderBlock) + "\r\n\r\nbody\r\n--a--\r\n"
        #expect(throws: FormError.headersTooLong) {
            try FormFields.parse(body: ByteBuffer(string: long), contentType: "multipart/form-data; boundary=a")
        }
        let longName = "--a\r\n" + String(repeating: "N", count: FormFields.maxHeaderBlock) + ": v\r\n\r\nbody\r\n--a--\r\n"
        #expect(throws: FormError.headersTooLong) {
            try FormFields.parse(body: ByteBuffer(string: longName), contentType: "multipart/form-data; boundary=a")
        }
        let fits =
            "--a\r\nContent-Disposition: form-data; name=\"cmd\"\r\nX: " + String(repeating: "v", count: 3_000)
            + "\r\n\r\njoin\r\n--a--\r\n"
        #expect(
            (try? FormFields.parse(body: ByteBuffer(string: fits), contentType: "multipart/form-data; boundary=a"))?["cmd"]
                == Array("join".utf8)
        )
    }

    @Test func otherContentTypesAreRefused() {
        #expect(throws: FormError.unsupportedContentType) {
            try FormFields.parse(body: ByteBuffer(string: "{}"), contentType: "application/json")
        }
    }
}
