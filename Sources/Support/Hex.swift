/// Hexadecimal digits, for device tokens (APNs) and percent-encoding (forms).
package enum Hex {
    /// The value of one hex digit (either case), or nil. Two comparisons, no table (every device token's 64 digits
    /// go through it on the binary path).
    @inlinable @inline(__always)
    package static func value(_ byte: UInt8) -> UInt8? {
        let digit = byte &- UInt8(ascii: "0")
        if digit < 10 { return digit }
        let letter = (byte | 0x20) &- UInt8(ascii: "a")
        return letter < 6 ? letter + 10 : nil
    }

    /// The lowercase hex digit of `value` (0...15).
    @inlinable
    package static func lowercaseDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
