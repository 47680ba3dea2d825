import Support
import Testing

@Suite struct HexTests {
    /// Every byte: the digits 0-9, a-f and A-F have their values, nothing else has one.
    @Test func everyByteHasTheValueOfItsDigitOrNone() {
        let digits = Array("0123456789abcdef".utf8)
        for byte in UInt8.min...UInt8.max {
            let lower = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
            let expected = digits.firstIndex(of: lower).map { UInt8($0) }
            #expect(Hex.value(byte) == expected, "byte \(byte)")
        }
    }

    @Test func lowercaseDigitsRoundTrip() {
        for value in UInt8(0)..<16 { #expect(Hex.value(Hex.lowercaseDigit(value)) == value) }
    }
}
