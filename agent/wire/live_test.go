package wire

import "testing"

// TestKernelTag: a kernel's tag reads back as its name and language;
// no other tag reads as one.
func TestKernelTag(t *testing.T) {
	for _, c := range [][2]string{{"javascript", "javascript"}, {"a1b2:c3", "typescript"}, {"x.y-z", "javascript"}} {
		name, language, ok := ParseKernelTag(KernelTag(c[0], c[1]))
		if !ok || name != c[0] || language != c[1] {
			t.Errorf("%q: %q %q %v", c, name, language, ok)
		}
	}
	for _, tag := range []string{"", "gantry-kernel:", "gantry-kernel:x", "gantry-kernel:x:python", "gantry-kernel::javascript", "e2b-context:x:javascript"} {
		if _, _, ok := ParseKernelTag(tag); ok {
			t.Errorf("%q read as a kernel's tag", tag)
		}
	}
}
