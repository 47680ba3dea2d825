extension String {
    /// The string without leading and trailing spaces, tabs and newlines.
    package func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}

extension Substring {
    /// The substring without leading and trailing spaces, tabs and newlines.
    package func trimmingWhitespace() -> String { String(self).trimmingWhitespace() }
}
