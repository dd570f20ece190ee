package runner

import "time"

// idleSet is the fleet's idle containers: each bound to a tenant, limits
// profile and image (bindKey), its workspace emptied, waiting for that
// binding's next job. Each binding's list runs from the least to the most
// recently used. It is one of the fleet's books, kept under the fleet's
// lock; a container joins it and leaves it only through the fleet, whose
// setLocked checks the move.
type idleSet map[bindKey][]*Container

// push adds c, just used, under its binding.
func (s idleSet) push(c *Container) {
	key := bindKey{tenant: c.tenant, limits: c.limits, image: c.image}
	s[key] = append(s[key], c)
}

// pop takes the binding's container used last, or nil.
func (s idleSet) pop(key bindKey) *Container {
	list := s[key]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	s.set(key, list[:len(list)-1])
	return c
}

// oldest is the least recently used container of any binding (nil when
// there is none), and its binding.
func (s idleSet) oldest() (*Container, bindKey) {
	var oldest *Container
	var at bindKey
	for key, list := range s {
		if c := list[0]; oldest == nil || c.lastUsed.Before(oldest.lastUsed) {
			oldest, at = c, key
		}
	}
	return oldest, at
}

// dropOldest takes the binding's least recently used container out.
func (s idleSet) dropOldest(key bindKey) { s.set(key, s[key][1:]) }

// takeTenant takes out every container bound to the tenant.
func (s idleSet) takeTenant(tenant string) []*Container {
	var out []*Container
	for key, list := range s {
		if key.tenant == tenant {
			out = append(out, list...)
			delete(s, key)
		}
	}
	return out
}

// expire takes out the containers that died and those left unused past
// idle.
func (s idleSet) expire(now time.Time, idle time.Duration, dead func(*Container) bool) (died, expired []*Container) {
	for key, list := range s {
		keep := list[:0]
		for _, c := range list {
			switch {
			case dead(c):
				died = append(died, c)
			case now.Sub(c.lastUsed) > idle:
				expired = append(expired, c)
			default:
				keep = append(keep, c)
			}
		}
		s.set(key, keep)
	}
	return died, expired
}

// drain takes every container out, for retirement.
func (s idleSet) drain() []*Container {
	var all []*Container
	for key, list := range s {
		all = append(all, list...)
		delete(s, key)
	}
	return all
}

func (s idleSet) count() int {
	n := 0
	for _, list := range s {
		n += len(list)
	}
	return n
}

// set keeps a binding's list, or drops the binding when it is empty.
func (s idleSet) set(key bindKey, list []*Container) {
	if len(list) == 0 {
		delete(s, key)
		return
	}
	s[key] = list
}
