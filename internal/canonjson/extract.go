package canonjson

// Elements returns the raw bytes of each element of the array found in doc
// by following the object keys in path (e.g. "predicate", "spec",
// "receipts"). A missing key or an empty array yields no elements. doc
// must be well-formed JSON whose keys need no unescaping along the path
// (true of canonical JSON with ASCII keys); anything else is an error.
func Elements(doc []byte, path ...string) ([][]byte, error) {
	c := &canon{in: doc}
	for _, key := range path {
		found, err := c.seekKey(key)
		if err != nil || !found {
			return nil, err
		}
	}
	c.ws()
	if c.i >= len(c.in) || c.in[c.i] != '[' {
		return nil, c.fail("not an array")
	}
	c.i++
	var out [][]byte
	for n := 0; ; n++ {
		c.ws()
		if c.i < len(c.in) && c.in[c.i] == ']' {
			return out, nil
		}
		if n > 0 {
			if err := c.expect(','); err != nil {
				return nil, err
			}
			c.ws()
		}
		start := c.i
		if err := c.skip(); err != nil {
			return nil, err
		}
		out = append(out, c.in[start:c.i])
	}
}

// seekKey positions c at the value of key in the object at c.i.
func (c *canon) seekKey(key string) (bool, error) {
	if err := c.expect('{'); err != nil {
		return false, err
	}
	for n := 0; ; n++ {
		c.ws()
		if c.i < len(c.in) && c.in[c.i] == '}' {
			return false, nil
		}
		if n > 0 {
			if err := c.expect(','); err != nil {
				return false, err
			}
		}
		if err := c.expect('"'); err != nil {
			return false, err
		}
		k, err := c.str()
		if err != nil {
			return false, err
		}
		if err := c.expect(':'); err != nil {
			return false, err
		}
		if string(k) == key {
			return true, nil
		}
		if err := c.skip(); err != nil {
			return false, err
		}
	}
}

// skip moves past one value, checking only its structure.
func (c *canon) skip() error {
	c.ws()
	if c.i >= len(c.in) {
		return c.fail("unexpected end")
	}
	switch c.in[c.i] {
	case '"':
		c.i++
		_, err := c.str()
		return err
	case '{', '[':
		depth := 0
		for c.i < len(c.in) {
			switch c.in[c.i] {
			case '{', '[':
				depth++
				if depth > MaxDepth {
					return c.fail("nesting deeper than %d", MaxDepth)
				}
			case '}', ']':
				depth--
				if depth == 0 {
					c.i++
					return nil
				}
			case '"':
				c.i++
				if _, err := c.str(); err != nil {
					return err
				}
				continue
			}
			c.i++
		}
		return c.fail("unterminated value")
	}
	start := len(c.out)
	err := c.scalar()
	c.out = c.out[:start]
	return err
}
